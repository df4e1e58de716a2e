"""Projective dependency trees with exactly one word attached to ROOT: Eisner's first-order chart in any semiring,
and the distribution over those trees (log partition, arc marginals, best tree).

Score matrices follow the package convention (``scores[b, d, h]``: word d takes head h; column 0 is ROOT, row 0
and the diagonal are ignored); sentence b uses positions 0..lengths[b] only, so a batch is the score matrices
padded to the longest sentence.  The chart (:func:`eisner_chart`) is shared by the distribution here and by the
decoder :func:`depinduce.structures.eisner.eisner`, which adds its own treatment of forbidden arcs and reads the
best tree off back-pointers instead of a gradient.

The chart is filled one span width at a time, and every span of that width, in every sentence of the batch, is
computed by the same few tensor operations: the only Python loop is over the N widths.  To make the split points
of all spans of one width a plain slice, a chart is stored twice where needed, indexed by [width, start] and by
[N - width, end]: the pieces ending at a span's right end then sit in one column of the second layout, in the
same order as the pieces starting at its left end in the first.

Single root: the arc ROOT -> h is built only from the empty left part (ROOT takes no other child), and the
complete span from ROOT is kept aside as an answer (one per width: the trees over the first w words), never used
as a piece of a larger span.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from depinduce.structures.distribution import ChartDistribution
from depinduce.structures.semirings import MaxSemiring, Semiring

@dataclass
class EisnerChart:
    """``roots`` (B, N+1): [b, w] the semiring total of the single-rooted trees over words 1..w (0 at w = 0,
    the empty tree); the split tables (B, N+1, N+1), indexed [b, width, start], only when back-pointers were
    asked for (else None)."""

    roots: torch.Tensor
    split_in: torch.Tensor | None = None
    split_right: torch.Tensor | None = None
    split_left: torch.Tensor | None = None


def eisner_chart(S: torch.Tensor, semiring: Semiring, backpointers: bool = False) -> EisnerChart:
    """Fill the Eisner chart width by width over ``S`` (B, N+1, N+1), whose row 0 must be the semiring's ``zero``
    (ROOT is never a dependent) and whose other entries are the arc scores (padding: any finite value).

    Spans (i, j) with j = i + w.  ``incomplete``: i and j linked (head i -> j, or j -> i); ``complete right``:
    headed at i and finished on the right; ``complete left``: headed at j and finished on the left.  Tables are
    stored [b, width, position] so that a width's results are one contiguous row and the reduction over split
    points runs over dimension 1, which torch vectorises far better than one over the last.  ``backpointers``
    (max semiring only) also records each span's best split point.
    """
    if backpointers and not isinstance(semiring, MaxSemiring):
        raise ValueError("back-pointers need the max semiring")
    B, M, _ = S.shape
    N = M - 1
    opts = {"dtype": S.dtype, "device": S.device}
    right_by_start = torch.full((B, M, M), semiring.zero, **opts)  # complete right, [width, start]
    right_by_end = torch.full((B, M, M), semiring.zero, **opts)  # complete right, [N - width, end]
    left_by_start = torch.full((B, M, M), semiring.zero, **opts)  # complete left, [width, start]
    left_by_end = torch.full((B, M, M), semiring.zero, **opts)  # complete left, [N - width, end]
    inc_right_by_start = torch.full((B, M, M), semiring.zero, **opts)  # incomplete i -> j, [width, start]
    inc_left_by_end = torch.full((B, M, M), semiring.zero, **opts)  # incomplete j -> i, [N - width, end]
    right_by_start[:, 0] = semiring.one
    left_by_start[:, 0] = semiring.one
    right_by_end[:, N] = semiring.one
    left_by_end[:, N] = semiring.one
    splits = [torch.zeros((B, M, M), dtype=torch.long, device=S.device) for _ in range(3)] if backpointers else []
    roots = [S.new_full((B,), semiring.one)]  # the empty tree

    def reduce(x: torch.Tensor, table: int, w: int, m: int) -> torch.Tensor:
        if not backpointers:
            return semiring.sum(x, 1)
        best, split = semiring.sum_with_argmax(x, 1)  # type: ignore[attr-defined]
        splits[table][:, w, :m] = split
        return best

    for w in range(1, M):
        m = M - w  # spans of width w start at 0..m-1
        # incomplete: C_right(i, i+t) + C_left(i+t+1, i+w), t = 0..w-1, plus the arc score
        best = reduce(right_by_start[:, :w, :m] + left_by_end[:, N - w + 1 :, w:], 0, w, m)
        inc_right_by_start[:, w, :m] = best + torch.diagonal(S, offset=-w, dim1=1, dim2=2)  # S[i+w, i]
        inc_left_by_end[:, N - w, w:] = best + torch.diagonal(S, offset=w, dim1=1, dim2=2)  # S[i, i+w]
        # complete right: I_right(i, i+t) + C_right(i+t, i+w), t = 1..w (the split table holds t - 1)
        best = reduce(inc_right_by_start[:, 1 : w + 1, :m] + right_by_end[:, N - w + 1 :, w:], 1, w, m)
        right_by_start[:, w, :m] = best
        right_by_end[:, N - w, w:] = best
        roots.append(best[:, 0])
        # complete left: C_left(i, i+t) + I_left(i+t, i+w), t = 0..w-1
        best = reduce(left_by_start[:, :w, :m] + inc_left_by_end[:, N - w : N, w:], 2, w, m)
        left_by_start[:, w, :m] = best
        left_by_end[:, N - w, w:] = best
        # single root: the complete span from ROOT is an answer only, never a piece of a longer span
        right_by_start[:, w, 0] = semiring.zero
    return EisnerChart(torch.stack(roots, 1), *splits)


class ProjectiveTrees(ChartDistribution):
    """The projective single-rooted dependency trees of each sentence, a tree scored by the sum of its arcs.

    ``scores`` (B, N+1, N+1) ``[b, d, h]``; ``lengths`` (B,) (default: every sentence N words).  −∞ forbids an
    arc (a sentence whose every tree needs one has log Z = −∞ and zero marginals; the decoder
    :func:`~depinduce.structures.eisner.eisner` instead prefers the trees with the fewest).  Padding, row 0 and
    the diagonal are ignored, NaN included.  Marginals and the best tree are gradients of the chart's total
    (torch-struct's approach), computed on the scores as constants, so they work under ``torch.no_grad``.
    """

    def __init__(self, scores: torch.Tensor, lengths: torch.Tensor | Sequence[int] | None = None) -> None:
        if scores.dim() != 3 or scores.shape[1] != scores.shape[2] or scores.shape[1] == 0:
            raise ValueError(f"expected a (B, N+1, N+1) score tensor, got shape {tuple(scores.shape)}")
        self.scores = scores
        self.lengths = _lengths(lengths, scores.shape[0], scores.shape[1] - 1, scores.device)

    @property
    def parts(self) -> torch.Tensor:
        """The arc scores: ``marginals()[b, d, h]`` = P(h heads d) under the trees' softmax, 0 outside the
        sentence; ``argmax()`` is 1 where the best tree has the arc h -> d."""
        return self.scores

    @staticmethod
    def chart_total(parts: torch.Tensor, lengths: torch.Tensor, semiring: Semiring) -> torch.Tensor:
        return _total(parts, lengths, semiring)


def _total(scores: torch.Tensor, lengths: torch.Tensor, semiring: Semiring) -> torch.Tensor:
    roots = eisner_chart(_potentials(scores, lengths, semiring.zero), semiring).roots
    return roots.gather(1, lengths.view(-1, 1)).squeeze(1)


def _lengths(lengths: Any, batch: int, n_words: int, device: torch.device) -> torch.Tensor:
    """(B,) long on ``device``; every length within 0..n_words."""
    if lengths is None:
        return torch.full((batch,), n_words, dtype=torch.long, device=device)
    out = torch.as_tensor(lengths, dtype=torch.long, device=device).reshape(-1)
    if out.shape[0] != batch:
        raise ValueError(f"{out.shape[0]} lengths for a batch of {batch}")
    if bool(((out < 0) | (out > n_words)).any()):
        raise ValueError(f"a sentence length outside 0..{n_words}")
    return out


def _potentials(scores: torch.Tensor, lengths: torch.Tensor, zero: float) -> torch.Tensor:
    """The chart's arc scores: padding and the diagonal (NaN there included) set to 0, row 0 to ``zero``."""
    B, M, _ = scores.shape
    pos = torch.arange(M, device=scores.device)
    length = lengths.view(B, 1, 1)
    valid = ((pos.view(1, M, 1) <= length) & (pos.view(1, 1, M) <= length) & (pos.view(M, 1) != pos.view(1, M)))
    S = torch.where(valid, scores, torch.zeros((), dtype=scores.dtype, device=scores.device))
    return S.masked_fill((pos == 0).view(1, M, 1), zero)
