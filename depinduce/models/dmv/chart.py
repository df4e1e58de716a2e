"""Inside algorithm of the DMV over projective trees, batched over sentences, in the log or the max semiring.

The chart is Eisner's split-head chart (each word's left and right dependents are built separately, inside out).
For a half-span of head h, the valence "h already has a dependent on this side" is not a separate chart bit: a
half-span wider than h itself must contain a dependent of h, so valence = (span width > 0).  Items, all
``(N, N, B)`` tensors indexed ``[i, j]`` with i <= j (batch last so that stripes of split points are strided views):

- ``open_r[i, j]``: head i, its right dependents cover i..j, its right side not yet stopped (``open_l`` mirrored,
  head j).
- ``closed_r[i, j] = open_r[i, j] + log P(stop | i, right, valence = j > i)`` (``closed_l`` mirrored).
- ``arc_r[i, j]``: head i takes j as its next right dependent: j's left side closed, j's right side not built yet:
  ``log P(continue | i, right, v) + log P(c_j | c_i, right) + open_r[i, m] + closed_l[m+1, j]`` summed over m.
- ``open_r[i, j] = sum_k arc_r[i, k] + closed_r[k, j]``.

The only Python loop is over the span width; every split point of every span of that width, of every sentence,
is one tensor operation (strided views of the chart, as in supar's Eisner).  The recursion is the DMV's own (its
valence and stop factors do not fit the plain first-order chart of :mod:`depinduce.structures.projective`), its
semiring the shared one (:mod:`depinduce.structures.semirings`): in the log semiring the result is log Z and
autograd of it gives expected counts / arc marginals (inside-outside); in the max semiring it is the best tree's
log-probability and its gradient is the indicator of that tree (``torch.max`` routes the gradient to one
argument, so ties give one tree).  O(n^3) time and O(n^2) memory per sentence.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from depinduce.structures.semirings import Semiring as SemiringOps
from depinduce.structures.semirings import SemiringName, as_semiring

Semiring = SemiringName  # the name the model's signatures use: "log" or "max"


@dataclass
class SentenceScores:
    """Per-sentence DMV log-probabilities in chart layout (batch last).

    ``attach_r[i, j]`` = log P(c_j | c_i, right) for i < j; ``attach_l[i, j]`` = log P(c_i | c_j, left) for i < j;
    ``stop`` (4, N, B): log P(stop) for (right, v=0), (right, v=1), (left, v=0), (left, v=1); ``cont`` likewise
    for continue; ``root`` (N, B): log P(root = c_i).  ``lengths`` (B,) true lengths; padding scores must be
    finite (any class) — padded positions never reach a real sentence's total."""

    attach_r: torch.Tensor
    attach_l: torch.Tensor
    stop: torch.Tensor
    cont: torch.Tensor
    root: torch.Tensor
    lengths: torch.Tensor


def stripe(x: torch.Tensor, n: int, w: int, offset: tuple[int, int] = (0, 0), horizontal: bool = True
           ) -> torch.Tensor:
    """An (n, w, B) strided view of chart ``x`` (N, N, B): row k holds ``x[o0 + k, o1 + k + u]`` (horizontal) or
    ``x[o0 + k + u, o1 + k]`` (vertical) for u < w."""
    size, numel = x.size(1), x.stride(1)
    return x.as_strided(size=(n, w, x.size(2)),
                        stride=((size + 1) * numel, (1 if horizontal else size) * numel, x.stride(2)),
                        storage_offset=(offset[0] * size + offset[1]) * numel)


def inside(scores: SentenceScores, semiring: SemiringName | SemiringOps = "log") -> torch.Tensor:
    """log Z (log semiring) or the best tree's log-probability (max semiring) of each sentence, shape (B,)."""
    ring = as_semiring(semiring)
    attach_r, attach_l = scores.attach_r, scores.attach_l
    n_words, batch = attach_r.shape[0], attach_r.shape[2]
    stop_r0, stop_r1, stop_l0, stop_l1 = scores.stop
    cont_r0, cont_r1, cont_l0, cont_l1 = scores.cont
    new = attach_r.new_zeros
    open_r, open_l = new(n_words, n_words, batch), new(n_words, n_words, batch)
    closed_r, closed_l = new(n_words, n_words, batch), new(n_words, n_words, batch)
    arc_r, arc_l = new(n_words, n_words, batch), new(n_words, n_words, batch)
    closed_r.diagonal().copy_(stop_r0.t())
    closed_l.diagonal().copy_(stop_l0.t())
    for w in range(1, n_words):
        n = n_words - w
        heads_r, heads_l = slice(0, n), slice(w, n_words)  # the head of span [i, i + w] on each side
        # attach: the head's first dependent on that side (v = 0), or a further one (v = 1)
        first_r = cont_r0[heads_r] + closed_l.diagonal(w - 1)[:, 1:].t()  # closed_l[i + 1, j]
        first_l = cont_l0[heads_l] + closed_r.diagonal(w - 1)[:, :-1].t()  # closed_r[i, j - 1]
        if w > 1:
            later_r = cont_r1[heads_r] + ring.dot(
                stripe(open_r, n, w - 1, (0, 1)), stripe(closed_l, n, w - 1, (2, w), horizontal=False), 1)
            later_l = cont_l1[heads_l] + ring.dot(
                stripe(closed_r, n, w - 1, (0, 0)), stripe(open_l, n, w - 1, (1, w), horizontal=False), 1)
            first_r, first_l = ring.plus(first_r, later_r), ring.plus(first_l, later_l)
        arc_r.diagonal(w).copy_((first_r + attach_r.diagonal(w).t()).t())
        arc_l.diagonal(w).copy_((first_l + attach_l.diagonal(w).t()).t())
        # complete: the last dependent's own outer side closed
        grown_r = ring.dot(stripe(arc_r, n, w, (0, 1)), stripe(closed_r, n, w, (1, w), horizontal=False), 1)
        grown_l = ring.dot(stripe(closed_l, n, w, (0, 0)), stripe(arc_l, n, w, (0, w), horizontal=False), 1)
        open_r.diagonal(w).copy_(grown_r.t())
        open_l.diagonal(w).copy_(grown_l.t())
        closed_r.diagonal(w).copy_((grown_r + stop_r1[heads_r]).t())
        closed_l.diagonal(w).copy_((grown_l + stop_l1[heads_l]).t())
    return _root(scores, closed_l, closed_r, ring)


def _root(scores: SentenceScores, closed_l: torch.Tensor, closed_r: torch.Tensor, ring: SemiringOps
          ) -> torch.Tensor:
    """Combine each root candidate r: root score + its closed left half [0, r] + its closed right half [r, n-1]."""
    n_words, batch = scores.root.shape
    last = (scores.lengths - 1).to(scores.root.device)
    left = closed_l[0]  # (N, B): closed_l[0, r]
    right = closed_r.gather(1, last.view(1, 1, batch).expand(n_words, 1, batch)).squeeze(1)  # closed_r[r, n-1]
    total = scores.root + left + right
    positions = torch.arange(n_words, device=total.device).unsqueeze(1)
    total = total.masked_fill(positions > last.unsqueeze(0), ring.zero)  # padding: no root there
    return ring.sum(total, 0)
