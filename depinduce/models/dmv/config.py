"""Hyperparameters of the DMV (Klein & Manning 2004) with the paper's setting as defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from depinduce.errors import RecipeError

View = Literal["upos", "xpos", "words"]


@dataclass
class DMVConfig:
    """``view``: the tokens the DMV generates — gold ``xpos`` (the paper: Penn tags) or ``upos`` read from
    CoNLL-U input, or ``words``: the ``max_words`` most frequent (normalised) training words each get a class and
    every other word shares ``<unk>``.

    ``smoothing``: pseudo-count added to every event in each M-step, only so that no probability is exactly 0
    (log 0 would make the inside pass's gradients NaN); 1e-6 is far below one observed event.
    ``tolerance``: EM stops when the training log-likelihood per token improves by less than this (K&M ran EM to
    convergence); ``train.epochs`` caps the number of EM iterations."""

    view: View = "xpos"
    max_words: int = 200
    smoothing: float = 1e-6
    tolerance: float = 1e-5

    def __post_init__(self) -> None:
        if self.view not in ("upos", "xpos", "words"):
            raise RecipeError(f"model_config.view must be upos, xpos or words, not {self.view!r}")
        if self.max_words < 1:
            raise RecipeError("model_config.max_words must be at least 1")
        if not self.smoothing > 0:
            raise RecipeError("model_config.smoothing must be positive (a zero probability breaks EM's E-step)")
        if self.tolerance < 0:
            raise RecipeError("model_config.tolerance must be 0 or more")
