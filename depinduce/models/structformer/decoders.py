"""StructFormer's own dependency decoders: the paper's argmax, and the authors' test-time rule, ties included.

The authors (``test_phrase_grammar.py``) make every word whose height equals the sentence's greatest height a
root, and give every other word the first position of its largest parent probability.  The shared ``argmax``
decoder with word heights does the same except at a tie for the greatest height, where it keeps only the first
of the tied words as the root and attaches the others to their best parents; this decoder keeps them all (the
result then has several roots, as theirs has).

Neither always gives a tree (cycles), so ``parse`` writes ``mst`` trees unless asked for them by name, even for a
run whose ``train.decoder`` is ``structformer-argmax`` (the paper recipe's, which selects and reports with it).

Both decide the root per sentence, by height — the most probable word of the model's sentence-head distribution
(ROOT's column of the scores, ``model.sentence_root_scores``) — and not per word.  So ``parse --probs`` prints,
with them, the distribution given that root (:func:`given_height_roots`): the root word(s) ROOT = 1, every other
word ROOT = 0 and its parent distribution renormalised over the words; each row's argmax is then the head the
decoder gave (``mst`` and ``eisner`` read, and print, r and P together).
"""

from __future__ import annotations

import torch

from depinduce.models.base import OwnDecoder, ParseScores, described_decoders, row_softmax
from depinduce.models.structformer.decoder_info import DECODERS
from depinduce.structures.decode import argmax_heads


def height_argmax(scores: ParseScores) -> list[int]:
    """The shared ``argmax`` decoder as StructFormer's paper decodes: the highest word (the first at a tie) is the
    only root and every other word takes its best *word* head (:func:`argmax_heads` with ``root``)."""
    if scores.heights is None:
        return argmax_heads(scores.heads)
    return argmax_heads(scores.heads, int(scores.heights.argmax()) + 1)


def tied_root_argmax(scores: ParseScores) -> list[int]:
    """Heads (1-based, 0 = ROOT): 0 for every word at the greatest height, else the first word with the highest
    parent score in its row of ``scores.heads`` (log P, the diagonal −inf).

    Heights are compared exactly, in the dtype the backend gave them (float32, as the authors').  One case
    still differs: a row whose every parent probability is below float32's smallest normal number (1.2e-38)
    reaches the decoder as equal floored scores, and gets the first word other than itself, where the authors'
    float32 argmax compares the unfloored (possibly zero) values, the word's own zero diagonal included.
    """
    if scores.heads is None or scores.heights is None:
        raise ValueError("structformer-argmax needs head scores and word heights")
    heights = scores.heights.detach().cpu()
    n = heights.numel()
    if scores.heads.shape != (n + 1, n + 1):
        raise ValueError(f"head scores of shape {tuple(scores.heads.shape)} for {n} words")
    if n == 0:
        return []
    parents = scores.heads.detach().cpu()[1:, 1:].to(torch.float64)
    if torch.isnan(parents).any():
        raise ValueError("score matrix contains NaN")
    parents.fill_diagonal_(float("-inf"))
    # torch.argmax returns the first maximal index, as numpy's does in the authors' code
    best = (parents.argmax(dim=1) + 1).tolist() if n > 1 else [0]
    is_root = (heights == heights.max()).tolist()
    return [0 if root else head for root, head in zip(is_root, best)]


def given_height_roots(scores: ParseScores, roots: torch.Tensor) -> torch.Tensor:
    """n×(n+1) float64: the head distribution given the root words ``roots`` (n booleans) — ROOT = 1 for them;
    for every other word ROOT = 0 and the softmax of its row of parent scores over the words (P renormalised)."""
    assert scores.heads is not None
    words = scores.heads[1:].detach().cpu().clone()
    words[:, 0] = float("-inf")  # a row of −inf only (a one-word sentence) gets ROOT = 1 from row_softmax
    probs = row_softmax(words)
    chosen = roots.detach().cpu().bool()
    probs[chosen] = 0.0
    probs[chosen, 0] = 1.0
    return probs


def _highest(scores: ParseScores, *, ties: bool) -> torch.Tensor:
    """The words made roots: every word at the greatest height (``ties``), or the first of them."""
    assert scores.heights is not None
    heights = scores.heights.detach().cpu()
    if ties:
        return heights == heights.max()
    roots = torch.zeros(heights.numel(), dtype=torch.bool)
    roots[int(heights.argmax())] = True
    return roots


def height_argmax_probs(scores: ParseScores) -> torch.Tensor:
    """What :func:`height_argmax` reads: the distribution given the first highest word as the root."""
    if scores.heights is None:
        return row_softmax(scores.heads[1:])  # no heights: the shared argmax over the scores' own rows
    return given_height_roots(scores, _highest(scores, ties=False))


def tied_root_argmax_probs(scores: ParseScores) -> torch.Tensor:
    """What :func:`tied_root_argmax` reads: the distribution given every highest word as a root."""
    if scores.heights is None:
        raise ValueError("structformer-argmax needs head scores and word heights")
    return given_height_roots(scores, _highest(scores, ties=True))


OWN_DECODERS = described_decoders(DECODERS, {"structformer-argmax": tied_root_argmax},
                                  not_trees={"structformer-argmax"},
                                  probs={"structformer-argmax": tied_root_argmax_probs})
# What ``--decoder argmax`` runs for StructFormer (``Backend.shared_decoder_forms``).
SHARED_FORMS = {"argmax": OwnDecoder("each word's best head, the highest word the only root (the paper's argmax); "
                                     "not always a tree", height_argmax, gives_trees=False,
                                     probs=height_argmax_probs)}
