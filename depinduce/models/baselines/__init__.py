"""Trivial baselines: left-branching, right-branching and random trees.

They are the sanity anchors of every evaluation (docs/evaluation-protocol.md) and exercise the whole pipeline
without training.
Each produces both outputs: heads (left/right-branching give their tree itself, which every decoder would return,
so no score matrix is built and any length parses; random gives random scores for the chosen decoder) and split
distances whose top-down tree is the baseline's binary constituency tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from depinduce.errors import ModelError
from depinduce.models.base import Backend, Induces, ParseScores
from depinduce.models.views import VisibleWords

# Left/right-branching decide their tree without a score matrix (``ParseScores.fixed_heads``): any length parses.
_FIXED = VisibleWords(pairwise=False)


class _FixedBaseline(Backend):
    """Shared loading for the untrained baselines, which take no run directory."""

    induces = Induces(dependency=True, constituency=True)
    head_probs = "decoded"  # the tree is the baseline's decision, not a distribution: its heads have probability 1

    @classmethod
    def load(cls, run_dir: Path | None, *, device: str = "cpu", seed: int = 0) -> Backend:
        if run_dir is not None:
            raise ModelError(f"{run_dir}: the '{cls.name}' baseline takes no run directory")
        return cls(seed=seed)

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed


class RightBranching(_FixedBaseline):
    """Each word's head is the next word, the last word is the root; the tree is ``(w1 (w2 (w3 ...)))``."""

    name = "right-branching"
    description = "head = next word, last word is root; right-branching binary tree"
    input_view = _FIXED

    def parse_scores(self, sentences: Sequence[Sequence[str]]) -> list[ParseScores]:
        out = []
        for words in sentences:
            n = len(words)
            heads = [i + 1 for i in range(1, n)] + ([0] if n else [])
            # Decreasing distances: the top split is after the first word, then after the second, ...
            distances = torch.arange(n - 1, 0, -1, dtype=torch.float)
            out.append(ParseScores(fixed_heads=heads, distances=distances))
        return out


class LeftBranching(_FixedBaseline):
    """Each word's head is the previous word, the first word is the root; the tree is ``(((w1 w2) w3) ...)``."""

    name = "left-branching"
    description = "head = previous word, first word is root; left-branching binary tree"
    input_view = _FIXED

    def parse_scores(self, sentences: Sequence[Sequence[str]]) -> list[ParseScores]:
        out = []
        for words in sentences:
            n = len(words)
            heads = list(range(0, n))
            distances = torch.arange(1, n, dtype=torch.float)
            out.append(ParseScores(fixed_heads=heads, distances=distances))
        return out


class RandomBaseline(_FixedBaseline):
    """Uniformly random head scores and split distances from a seeded generator.

    The generator is seeded once per loaded model (``seed``, default 0), so the same input in the same order
    always gets the same trees.  MST/Eisner turn the random scores into random (projective) trees; argmax may
    produce non-trees, which is what an argmax decoder does on noise.
    """

    name = "random"
    description = "seeded random head scores and split distances"

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.generator = torch.Generator().manual_seed(seed)

    def parse_scores(self, sentences: Sequence[Sequence[str]]) -> list[ParseScores]:
        out = []
        for words in sentences:
            n = len(words)
            heads = torch.rand((n + 1, n + 1), generator=self.generator)
            distances = torch.rand((max(n - 1, 0),), generator=self.generator)
            out.append(ParseScores(heads=heads, distances=distances))
        return out
