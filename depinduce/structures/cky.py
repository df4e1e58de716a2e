"""CKY over fencepost spans in any semiring: the chart layout and width loop shared by every binary-tree model,
and the distribution over binary bracketings scored by span weights (log partition, span marginals, best tree).

Spans are (i, j) over fenceposts (words i..j−1).  A :class:`SpanChart` holds one item per span — a score, or a
vector of them (a grammar's nonterminals) — twice: by (width, start) and by (width, end).  The left children of
every split of every span of one width are then one plain slice of the first layout, and the right children one
slice of the second (reversed): the only Python loop is over span width, and autograd reads and writes plain
slices (strided "stripe" views of a single chart cost a full-chart scatter per read in backward).

:func:`cky` runs the loop: a model supplies how a width's items are built from the narrower ones (its rule
scores), the chart adds optional span weights — zeros whose gradient is each span's marginal (log semiring) or
its membership in the best tree (max semiring) — and stores the result.  :class:`BinaryTrees` is the plainest
such model: a tree's score is the sum of the weights of its spans.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from depinduce.structures.distribution import ChartDistribution
from depinduce.structures.semirings import Semiring


class SpanChart:
    """Items of shape ``item`` per span and sentence, stored as ``by_start`` (N+1, N+1, B, *item) indexed
    [width, start] and ``by_end`` indexed [width, end]; entries not yet filled are 0."""

    def __init__(self, n_words: int, batch: int, item: tuple[int, ...], like: torch.Tensor) -> None:
        self.n_words = n_words
        self.by_start = like.new_zeros(n_words + 1, n_words + 1, batch, *item)
        self.by_end = like.new_zeros(n_words + 1, n_words + 1, batch, *item)

    def spans(self, w: int) -> int:
        """How many spans of width ``w`` a sentence of n_words has."""
        return self.n_words - w + 1

    def splits(self, w: int, smallest: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The children of every split of every span of width ``w`` whose two sides are both at least
        ``smallest`` wide: left (n, k, B, *item) with left widths ``smallest .. w − smallest`` along k, and the
        matching right children (widths ``w − smallest .. smallest``), where n = :meth:`spans`."""
        n, top = self.spans(w), w - smallest + 1
        left = self.by_start[smallest:top, :n].transpose(0, 1)
        right = self.by_end[smallest:top, w:w + n].flip(0).transpose(0, 1)
        return left, right

    def set(self, w: int, value: torch.Tensor) -> None:
        """Store the items (n, B, *item) of the spans of width ``w``, by start."""
        n = self.spans(w)
        self.by_start[w, :n] = value
        self.by_end[w, w:w + n] = value

    def whole(self, lengths: torch.Tensor, smallest: int) -> torch.Tensor:
        """(B, *item): each sentence's item of the span (0, length), lengths clamped into smallest..n_words."""
        batch = self.by_start.shape[2]
        last = lengths.to(self.by_start.device).clamp(min=smallest, max=self.n_words)
        return self.by_start[last, 0, torch.arange(batch, device=self.by_start.device)]


def cky(chart: SpanChart, widths: range, build: Callable[[int], torch.Tensor],
        span_weights: torch.Tensor | None = None) -> None:
    """Fill ``chart`` width by width: ``build(w)`` gives the items (n, B, *item) of the spans of width ``w`` from
    the narrower ones, ``span_weights`` (B, N+1, N+1) ``[b, i, j]``, if given, is added to every entry of span
    (i, j)'s item."""
    weights = None if span_weights is None else span_weights.permute(1, 2, 0)  # (N+1, N+1, B)
    for w in widths:
        value = build(w)
        if weights is not None:
            per_span = weights.diagonal(w).t()  # (n, B)
            value = value + per_span.view(*per_span.shape, *[1] * (value.dim() - 2))
        chart.set(w, value)


class BinaryTrees(ChartDistribution):
    """The binary bracketings of each sentence, a bracketing scored by the sum of ``weights`` (B, N+1, N+1)
    ``[b, i, j]`` over its spans of width ≥ 2 (the one-word spans are in every bracketing and carry no score).

    ``lengths`` (B,) (default: every sentence N words).  A sentence of 0 or 1 words has one bracketing, with no
    scored span: its total is 0.  Marginals and the best tree are gradients of the chart's total, computed on the
    weights as constants.  With posterior span marginals as weights, :meth:`argmax` is the minimum-Bayes-risk
    bracketing.
    """

    def __init__(self, weights: torch.Tensor, lengths: torch.Tensor | Sequence[int] | None = None) -> None:
        if weights.dim() != 3 or weights.shape[1] != weights.shape[2] or weights.shape[1] == 0:
            raise ValueError(f"expected a (B, N+1, N+1) weight tensor, got shape {tuple(weights.shape)}")
        batch, n_words = weights.shape[0], weights.shape[1] - 1
        self.weights = weights
        if lengths is None:
            lengths = torch.full((batch,), n_words, dtype=torch.long)
        self.lengths = torch.as_tensor(lengths, dtype=torch.long, device=weights.device).reshape(-1)
        if self.lengths.shape[0] != batch:
            raise ValueError(f"{self.lengths.shape[0]} lengths for a batch of {batch}")

    @property
    def parts(self) -> torch.Tensor:
        """The span weights: ``marginals()[b, i, j]`` = P(span (i, j) is a constituent), non-zero only for width
        ≥ 2 inside the sentence; ``argmax()`` marks the best bracketing's spans."""
        return self.weights

    @staticmethod
    def chart_total(parts: torch.Tensor, lengths: torch.Tensor, semiring: Semiring) -> torch.Tensor:
        return _total(parts, lengths, semiring)

    def _gradient(self, semiring: Semiring) -> torch.Tensor:
        if self.weights.shape[1] < 3:  # no span of width 2 or more: nothing to mark
            return torch.zeros_like(self.weights)
        return super()._gradient(semiring)


def _total(weights: torch.Tensor, lengths: torch.Tensor, semiring: Semiring) -> torch.Tensor:
    batch, n_words = weights.shape[0], weights.shape[1] - 1
    # spans past a sentence's end never reach its total, but a NaN there would reach its gradient (0 × NaN)
    fence = torch.arange(n_words + 1, device=weights.device)
    inside = (fence.view(-1, 1) < fence.view(1, -1)) & (fence.view(1, 1, -1) <= lengths.view(-1, 1, 1))  # i < j ≤ n
    weights = torch.where(inside, weights, torch.zeros((), dtype=weights.dtype, device=weights.device))
    chart = SpanChart(n_words, batch, (), weights)  # one-word spans: score 0

    def build(w: int) -> torch.Tensor:
        left, right = chart.splits(w, 1)
        return semiring.dot(left, right, 1)

    cky(chart, range(2, n_words + 1), build, weights)
    whole = chart.whole(lengths, 1)
    return torch.where(lengths >= 2, whole, torch.zeros_like(whole))
