"""The shared chart layer: semirings, and the distributions over projective dependency trees and over binary
bracketings — log partition, marginals and best structure against brute-force enumeration, in both semirings."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from brute_force import bracketing_spans, projective_trees
from depinduce.structures.cky import BinaryTrees, SpanChart
from depinduce.structures.dependency import is_projective, is_tree
from depinduce.structures.eisner import eisner
from depinduce.structures.projective import ProjectiveTrees
from depinduce.models.cpcfg.chart import Grammar, inside
from depinduce.structures.semirings import LOG, MAX, LogSemiring, MaxSemiring, Semiring, as_semiring

NEG_INF = float("-inf")
LENGTHS = [4, 0, 6, 1, 3, 5, 2]  # one batch, shuffled so that padding sits in the middle too

# ------------------------------------------------------------------------------------------- semirings


def test_semiring_operations() -> None:
    x = torch.tensor([[0.5, -1.0, 2.0], [NEG_INF, 3.0, 1.0]], dtype=torch.float64)
    assert torch.equal(LOG.sum(x, 1), torch.logsumexp(x, 1))
    assert torch.equal(MAX.sum(x, -1), torch.tensor([2.0, 3.0], dtype=torch.float64))
    a, b = x[0], x[1]
    assert torch.allclose(LOG.plus(a, b), torch.logaddexp(a, b))
    assert torch.equal(MAX.plus(a, b), torch.maximum(a, b))
    assert torch.equal(LOG.times(a, b, a), a + b + a)
    assert torch.equal(MAX.dot(a, b, 0), (a + b).max())
    assert LOG.sum(torch.tensor([LOG.zero, 1.5]), 0).item() == 1.5 and LOG.times(torch.tensor(2.0), LOG.one) == 2.0
    best, where = MAX.sum_with_argmax(x, 1)
    assert best.tolist() == [2.0, 3.0] and where.tolist() == [2, 1]
    assert as_semiring("log") is LOG and as_semiring("max") is MAX and as_semiring(MAX) is MAX
    assert isinstance(LOG, LogSemiring) and isinstance(MAX, MaxSemiring)
    with pytest.raises(ValueError, match="unknown semiring 'sum'"):
        as_semiring("sum")  # type: ignore[arg-type]


def test_log_sum_of_nothing_has_a_zero_gradient_and_elsewhere_torchs_own() -> None:
    torch.manual_seed(0)
    x = (torch.randn(4, 5, 3, dtype=torch.float64) * 20).requires_grad_()
    weights = torch.randn(4, 3, dtype=torch.float64)
    (ours,) = torch.autograd.grad(LOG.sum(x, 1), x, weights)
    (torchs,) = torch.autograd.grad(torch.logsumexp(x, 1), x, weights)
    assert torch.equal(ours, torchs)  # the same operations in the same order: bit for bit
    empty = torch.tensor([[NEG_INF, NEG_INF], [0.0, 1.0]], requires_grad=True)
    total = LOG.sum(empty, 1)
    assert total[0].item() == NEG_INF
    (grad,) = torch.autograd.grad(total.sum(), empty)
    assert grad[0].tolist() == [0.0, 0.0]
    assert torch.allclose(grad[1], torch.softmax(empty[1].detach(), 0))
    (nan,) = torch.autograd.grad(torch.logsumexp(empty, 1).sum(), empty)
    assert torch.isnan(nan[0]).all()  # what the shared one avoids


# ----------------------------------------------------------------------------------- dependency trees


def random_arcs(seed: int, lengths: list[int], forbidden_share: float = 0.0) -> torch.Tensor:
    """(B, N+1, N+1) float64 arc scores with NaN in the padding, which every chart must ignore."""
    rng = np.random.default_rng(seed)
    n = max(lengths)
    scores = np.full((len(lengths), n + 1, n + 1), np.nan)
    for b, length in enumerate(lengths):
        block = rng.normal(0.0, 2.0, size=(length + 1, length + 1))
        block[rng.random(block.shape) < forbidden_share] = -np.inf
        scores[b, : length + 1, : length + 1] = block
    return torch.tensor(scores)


def tree_scores(scores: torch.Tensor, n: int) -> tuple[np.ndarray, torch.Tensor]:
    """Every projective single-rooted tree of an n-word sentence and its score (sum of its arcs)."""
    trees = projective_trees(n)
    arcs = scores[torch.arange(1, n + 1), torch.as_tensor(trees.astype(np.int64))]  # (trees, n)
    return trees, arcs.sum(1)


def arc_indicators(trees: np.ndarray, n: int, size: int) -> torch.Tensor:
    """(trees, size, size) 0/1: [t, d, h] = 1 where tree t attaches word d to head h."""
    out = torch.zeros(len(trees), size, size, dtype=torch.float64)
    for t, heads in enumerate(trees):
        out[t, torch.arange(1, n + 1), torch.as_tensor(heads.astype(np.int64))] = 1.0
    return out


@pytest.mark.parametrize("forbidden_share", [0.0, 0.3], ids=["finite", "forbidden arcs"])
def test_projective_trees_match_enumeration_in_both_semirings(forbidden_share: float) -> None:
    scores = random_arcs(1, LENGTHS, forbidden_share)
    dist = ProjectiveTrees(scores, LENGTHS)
    log_z, best, marginals, argmax = dist.log_partition(), dist.max_score(), dist.marginals(), dist.argmax()
    assert not torch.isnan(marginals).any() and not torch.isnan(argmax).any()
    size = scores.shape[1]
    for b, n in enumerate(LENGTHS):
        if n == 0:  # the empty tree: one structure, score 0, no arcs
            assert log_z[b].item() == 0.0 and best[b].item() == 0.0
            assert not marginals[b].any() and not argmax[b].any()
            continue
        trees, totals = tree_scores(scores[b], n)
        assert log_z[b].item() == pytest.approx(torch.logsumexp(totals, 0).item(), abs=1e-10)
        assert best[b].item() == pytest.approx(totals.max().item(), abs=1e-10)
        indicators = arc_indicators(trees, n, size)
        possible = torch.isfinite(totals)
        if possible.any():
            expected = (torch.softmax(totals, 0).view(-1, 1, 1) * indicators).sum(0)
            assert torch.allclose(marginals[b], expected, atol=1e-10)
            assert torch.equal(argmax[b], indicators[int(totals.argmax())])  # random scores: no ties
        else:  # every tree needs a forbidden arc: no structure, no mass anywhere
            assert log_z[b].item() == NEG_INF and not marginals[b].any()


def test_a_sentence_without_any_allowed_tree() -> None:
    scores = torch.zeros(2, 4, 4, dtype=torch.float64)
    scores[0, :, 0] = NEG_INF  # sentence 0: no word may attach to ROOT
    dist = ProjectiveTrees(scores, [3, 3])
    log_z = dist.log_partition()
    assert log_z[0].item() == NEG_INF and log_z[1].item() == pytest.approx(np.log(7.0))  # 7 trees of 3 words
    marginals = dist.marginals()
    assert not marginals[0].any() and torch.allclose(marginals[1].sum(1)[1:], torch.ones(3, dtype=torch.float64))


def test_projective_marginals_without_autograd_and_with_default_lengths() -> None:
    scores = random_arcs(2, [5, 5]).float()
    with torch.no_grad():
        free = ProjectiveTrees(scores).marginals()
    with torch.inference_mode():
        inferred = ProjectiveTrees(scores, torch.tensor([5, 5])).marginals()
    assert free.dtype == torch.float32 and torch.equal(free, inferred)
    assert torch.allclose(free[:, 1:].sum(-1), torch.ones(2, 5), atol=1e-5)  # each word has one head


def test_the_decoder_and_the_distribution_agree_on_the_best_tree() -> None:
    """eisner() reads back-pointers of the shared chart, argmax() its gradient: the same tree."""
    for seed in range(5):
        scores = random_arcs(10 + seed, LENGTHS)
        argmax = ProjectiveTrees(scores, LENGTHS).argmax()
        for b, heads in enumerate(eisner(scores, LENGTHS)):
            n = LENGTHS[b]
            assert len(heads) == n and (n == 0 or (is_tree(heads) and is_projective(heads)))
            assert heads == [int(h) for h in argmax[b, 1 : n + 1, : n + 1].argmax(-1)]


def test_projective_trees_refuse_bad_shapes() -> None:
    with pytest.raises(ValueError, match="expected a"):
        ProjectiveTrees(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="3 lengths for a batch of 2"):
        ProjectiveTrees(torch.zeros(2, 4, 4), [1, 2, 3])
    with pytest.raises(ValueError, match="outside 0..3"):
        ProjectiveTrees(torch.zeros(2, 4, 4), [1, 4])


# ---------------------------------------------------------------------------------- binary bracketings


def random_spans(seed: int, lengths: list[int]) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    n = max(lengths)
    weights = torch.randn(len(lengths), n + 1, n + 1, generator=generator, dtype=torch.float64) * 2.0
    for b, length in enumerate(lengths):  # padding must not reach a real sentence's total
        weights[b, length + 1 :] = float("nan")
        weights[b, :, length + 1 :] = float("nan")
    return weights


def bracketing_scores(weights: torch.Tensor, n: int) -> tuple[list[frozenset[tuple[int, int]]], torch.Tensor]:
    brackets = bracketing_spans(n)
    totals = [sum((weights[i, j] for i, j in spans), torch.tensor(0.0, dtype=weights.dtype)) for spans in brackets]
    return brackets, torch.stack(totals)


def span_indicators(spans: frozenset[tuple[int, int]], size: int) -> torch.Tensor:
    out = torch.zeros(size, size, dtype=torch.float64)
    for i, j in spans:
        out[i, j] = 1.0
    return out


def test_binary_trees_match_enumeration_in_both_semirings() -> None:
    weights = random_spans(3, LENGTHS)
    dist = BinaryTrees(weights, LENGTHS)
    log_z, best, marginals, argmax = dist.log_partition(), dist.max_score(), dist.marginals(), dist.argmax()
    assert not torch.isnan(marginals).any() and not torch.isnan(argmax).any()
    size = weights.shape[1]
    for b, n in enumerate(LENGTHS):
        brackets, totals = bracketing_scores(weights[b], n)
        assert log_z[b].item() == pytest.approx(torch.logsumexp(totals, 0).item(), abs=1e-10)
        assert best[b].item() == pytest.approx(totals.max().item(), abs=1e-10)
        assert dist.partition("max")[b].item() == best[b].item()
        indicators = torch.stack([span_indicators(spans, size) for spans in brackets])
        expected = (torch.softmax(totals, 0).view(-1, 1, 1) * indicators).sum(0)
        assert torch.allclose(marginals[b], expected, atol=1e-10)
        assert torch.equal(argmax[b], indicators[int(totals.argmax())])
        if n >= 2:
            assert marginals[b, 0, n].item() == pytest.approx(1.0)  # the whole sentence is in every bracketing


def test_bracketing_counts_and_short_batches() -> None:
    # binary bracketings of n words: the Catalan numbers 1, 1, 2, 5, 14, 42
    assert [len(bracketing_spans(n)) for n in range(1, 7)] == [1, 1, 2, 5, 14, 42]
    uniform = BinaryTrees(torch.zeros(3, 7, 7), [6, 3, 4])
    assert torch.allclose(uniform.log_partition(), torch.tensor([42.0, 2.0, 5.0]).log())
    for size in (1, 2):  # no span of two words fits: one empty bracketing per sentence
        short = BinaryTrees(torch.randn(2, size, size), [size - 1, size - 1])
        assert short.log_partition().tolist() == [0.0, 0.0] and not short.marginals().any()


def test_span_chart_pairs_left_and_right_children_of_each_split() -> None:
    """Item [b, width, start] of a filled chart is the span itself: the splits must pair (i, k) with (k, j)."""
    n_words, batch = 5, 1
    chart = SpanChart(n_words, batch, (2,), torch.zeros(0))
    for w in range(1, n_words + 1):
        starts = torch.arange(chart.spans(w), dtype=torch.float32)
        chart.set(w, torch.stack([starts, starts + w], -1).view(-1, batch, 2))  # (start, end) of each span
    for smallest in (1, 2):
        for w in range(2 * smallest, n_words + 1):
            left, right = chart.splits(w, smallest)
            assert left.shape == right.shape == (chart.spans(w), w - 2 * smallest + 1, batch, 2)
            for i in range(chart.spans(w)):
                got = [(int(a[0, 0]), int(a[0, 1]), int(c[0, 0]), int(c[0, 1])) for a, c in zip(left[i], right[i])]
                assert got == [(i, k, k, i + w) for k in range(i + smallest, i + w - smallest + 1)]


# ------------------------------------------------------------------------------------- extension point


class MinSemiring(Semiring):
    """(min, +): the worst structure — a semiring of the charts' own interface, with ``zero`` = +∞."""

    name = "min"
    zero = float("inf")

    def sum(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        return x.min(dim).values


def test_a_new_semiring_plugs_into_both_distributions() -> None:
    scores, weights = random_arcs(4, LENGTHS), random_spans(5, LENGTHS)
    worst_tree = ProjectiveTrees(scores, LENGTHS).partition(MinSemiring())
    worst_bracketing = BinaryTrees(weights, LENGTHS).partition(MinSemiring())
    for b, n in enumerate(LENGTHS):
        expected = tree_scores(scores[b], n)[1].min().item() if n else 0.0
        assert worst_tree[b].item() == pytest.approx(expected, abs=1e-10)
        assert worst_bracketing[b].item() == pytest.approx(bracketing_scores(weights[b], n)[1].min().item(), abs=1e-10)
    grammar = Grammar(torch.zeros(1, 2), torch.zeros(1, 2, 3, 3), torch.zeros(1, 2, 1), torch.tensor([2]))
    with pytest.raises(ValueError, match="log or the max semiring"):
        inside(grammar, MinSemiring())
