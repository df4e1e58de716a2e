"""Inside algorithm of Kim et al.'s PCFG, batched over sentences, in the log or the max semiring; CKY over span
weights; binary trees as split distances.

The grammar (Kim, Dyer & Rush 2019): a start symbol S → A for NT nonterminals A, binary rules A → B C whose
children are nonterminals or preterminals (S = NT + T symbols, nonterminals first), and preterminals T → w.
Preterminals cover exactly one word and nonterminals at least two, so a span of width w ≥ 2 split at k has a
preterminal child exactly where that side is one word wide.  The chart therefore holds nonterminals only
(span (i, j): words i..j−1, fenceposts, width ≥ 2) and combines four rule blocks — B C both nonterminals
(``nn``), left nonterminal and right preterminal (``nt``), and ``tn``, ``tt`` — each over just the split points
where it applies.  That is about (NT + T)² / NT² = 9× less work than one (NT+T)² rule table for every split.

The chart is the shared CKY of :mod:`depinduce.structures.cky` (a :class:`~depinduce.structures.cky.SpanChart`
of ``(N+1, N+1, B, NT)`` items by (width, start) and by (width, end), one Python iteration per span width) with
this grammar's rule scores; the semiring comes from :mod:`depinduce.structures.semirings`.

Log semiring, numerically safe without an (NT × NT × NT) tensor per split: for each span, child pair and split,
the left and right scores are shifted by their maxima over symbols (and the splits by their largest shift), so
everything exponentiated is ≤ 0: the sum over splits of the outer products of the children's probabilities is
then one batched matrix product, and the rule probabilities (log-probabilities ≤ 0, exponentiated once per batch)
contract it in a second one.  A split with a one-word side reads that word's preterminal distribution, and that
word is always the span's first or last: its rules are summed over the preterminals once per word position
(:func:`_word_matrices`), leaving NT × NT per span instead of NT × T × NT.  The shifts are detached: they cancel
exactly, so their gradient is zero anyway.  The contracted sum is at least the probability of A's best rule for
the dominant child pair; only when every such rule is below float's tiny (float32: e^-87) does it underflow, and
it is clamped there, so log Z stays finite and no gradient is NaN — that entry is then overestimated, but it lies
≥ 87 nats below the span's best children and matters only if every nonterminal is in that regime (float64
extends the range to e^-708).

Marginals and trees by autograd, as in the DMV: a zero "span weight" added to each span's chart entries has
gradient = that span's posterior marginal under log Z (inside–outside) and, in the max semiring, the indicator
of the spans of the best derivation (``max`` routes the gradient to one argument, so ties give one tree).

A sentence the grammar cannot derive — fewer than two words: S → A and A → B C make every derivation cover at
least two — gets log Z = −inf (the authors skip them too); padding positions carry finite scores and never reach
a real sentence's total.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from depinduce.structures.cky import BinaryTrees, SpanChart, cky
from depinduce.structures.semirings import Semiring, SemiringName, as_semiring


@dataclass
class Grammar:
    """Log-probabilities of one batch.  ``G`` is 1 for a grammar shared by all sentences (the neural PCFG) or B for
    one grammar per sentence (the compound PCFG).

    ``root`` (G, NT): log P(S → A).  ``rules`` (G, NT, NT+T, NT+T): log P(A → B C), nonterminals first among B, C.
    ``terms`` (B, N, T): log P(T → w_i) of each word of each sentence (any finite value at padding).
    ``lengths`` (B,): the true lengths.
    """

    root: torch.Tensor
    rules: torch.Tensor
    terms: torch.Tensor
    lengths: torch.Tensor

    @property
    def nt(self) -> int:
        return self.root.shape[-1]

    def blocks(self) -> dict[str, torch.Tensor]:
        """The four rule blocks, each (G, NT, X·Y) for left children X and right children Y."""
        nt, rules = self.nt, self.rules
        parts = {"nn": rules[:, :, :nt, :nt], "nt": rules[:, :, :nt, nt:], "tn": rules[:, :, nt:, :nt],
                 "tt": rules[:, :, nt:, nt:]}
        return {name: block.reshape(*block.shape[:2], -1) for name, block in parts.items()}


def _combine_log(left: torch.Tensor, right: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
    """log Σ_{k,B,C} P(A → B C) · exp(left[k, B] + right[k, C]) for every span: ``left`` (n, k, B, X), ``right``
    (n, k, B, Y), ``probs`` (G, NT, X·Y) rule probabilities → (n, B, NT)."""
    n, _, batch, x = left.shape
    y = right.shape[-1]
    left_max = left.detach().amax(-1, keepdim=True)
    right_max = right.detach().amax(-1, keepdim=True)
    shift = left_max + right_max  # (n, k, B, 1): the split's largest child pair
    top = shift.amax(1)  # (n, B, 1): the span's largest over splits
    # exp(left − left_max + shift − top) = exp(left + right_max − top) ≤ 1, likewise exp(right − right_max) ≤ 1
    left_p = torch.exp(left + right_max - top.unsqueeze(1))
    right_p = torch.exp(right - right_max)
    pairs = torch.einsum("nkbx,nkby->nbxy", left_p, right_p).reshape(n, batch, x * y)
    if probs.shape[0] == 1:
        mixed = pairs @ probs[0].t()
    else:
        mixed = torch.einsum("nbq,baq->nba", pairs, probs)
    return mixed.clamp_min(torch.finfo(mixed.dtype).tiny).log() + top


def _combine_max(left: torch.Tensor, right: torch.Tensor, rules: torch.Tensor) -> torch.Tensor:
    """max_{k,B,C} log P(A → B C) + left[k, B] + right[k, C]: the same shapes as :func:`_combine_log` with
    ``rules`` as log-probabilities.  The rule does not depend on the split, so the split is maximised first, per
    child pair: max_{B,C} (log P(A → B C) + max_k (left[k, B] + right[k, C])) — the largest tensors are
    (n, k, B, X, Y) and (n, B, NT, X, Y), not their product (n, k, B, NT, X, Y)."""
    n, _, batch, x = left.shape
    y = right.shape[-1]
    pairs = (left.unsqueeze(-1) + right.unsqueeze(-2)).max(1).values  # (n, B, X, Y)
    table = rules.view(rules.shape[0], rules.shape[1], x * y)  # (G, NT, X·Y), G broadcasts against B
    return (table + pairs.reshape(n, batch, 1, x * y)).max(-1).values


def _word_rule_table(rules: torch.Tensor, t: int, word_first: bool) -> torch.Tensor:
    """The ``tn`` (``word_first``) or ``nt`` rule block (G, NT, T·NT) / (G, NT, NT·T) as (G, NT, T, NT): the word's
    preterminal always on dimension 2, the other child (a nonterminal) on dimension 3."""
    groups, nt = rules.shape[0], rules.shape[1]
    return rules.view(groups, nt, t, nt) if word_first else rules.view(groups, nt, nt, t).transpose(2, 3)


def _word_matrices(term_probs: torch.Tensor, probs: torch.Tensor, word_first: bool) -> torch.Tensor:
    """For every word position, the rule probabilities with that word as the preterminal child summed out:
    ``[i, b, A, C] = Σ_B P(A → B C) p̃(w_i | B)`` (``word_first``: the ``tn`` block, the word on the left) or
    ``[i, b, A, B] = Σ_C P(A → B C) p̃(w_i | C)`` (the ``nt`` block).  ``term_probs`` (N, B, T) are the word
    probabilities divided by their largest; ``probs`` (G, NT, T·NT) or (G, NT, NT·T).  A one-word side of a split
    is always the span's first (``tn``) or last (``nt``) word, so this is computed once per word, not per span."""
    n_words, batch, t = term_probs.shape
    groups, nt = probs.shape[0], probs.shape[1]
    table = _word_rule_table(probs, t, word_first)
    if groups == 1:  # (N·B, T) @ (T, NT·NT)
        flat = table[0].permute(1, 0, 2).reshape(t, nt * nt)
        return (term_probs.reshape(-1, t) @ flat).view(n_words, batch, nt, nt)
    return torch.einsum("nbx,baxy->nbay", term_probs, table)


def _word_matrices_max(terms: torch.Tensor, rules: torch.Tensor, word_first: bool) -> torch.Tensor:
    """:func:`_word_matrices` in the max semiring, from log-probabilities: ``[i, b, A, C] = max_B log P(A → B C) +
    log p(w_i | B)`` (``word_first``) or ``[i, b, A, B] = max_C log P(A → B C) + log p(w_i | C)``; ``terms``
    (N, B, T), ``rules`` (G, NT, T·NT) or (G, NT, NT·T) → (N, B, NT, NT)."""
    table = _word_rule_table(rules, terms.shape[-1], word_first)
    # (N, B, 1, T, 1) + (G, NT, T, NT) → max over the word's preterminal; G = 1 or B broadcasts against B
    return (terms[:, :, None, :, None] + table).max(3).values


def _with_word_max(matrices: torch.Tensor, span: torch.Tensor) -> torch.Tensor:
    """max_C M[A, C] + span[C] for a word-and-span split: ``matrices`` (n, B, NT, NT), ``span`` (n, B, NT)."""
    return (matrices + span.unsqueeze(-2)).max(-1).values


def _with_word(matrices: torch.Tensor, word_shift: torch.Tensor, span: torch.Tensor) -> torch.Tensor:
    """log Σ_C M[A, C] · exp(span[C]) + word_shift for a word-and-span split: ``matrices`` (n, B, NT, NT) from
    :func:`_word_matrices`, ``word_shift`` (n, B, 1) the word's score shift, ``span`` (n, B, NT) → (n, B, NT)."""
    span_max = span.detach().amax(-1, keepdim=True)
    mixed = (matrices @ torch.exp(span - span_max).unsqueeze(-1)).squeeze(-1)
    return mixed.clamp_min(torch.finfo(mixed.dtype).tiny).log() + word_shift + span_max


def inside(grammar: Grammar, semiring: Semiring | SemiringName = "log", span_weights: torch.Tensor | None = None
           ) -> torch.Tensor:
    """log Z (log semiring) or the best derivation's log-probability (max semiring) of each sentence, (B,).

    ``span_weights`` (B, N+1, N+1), optional: ``[b, i, j]`` is added to every nonterminal entry of span (i, j) —
    zeros whose gradient gives span marginals (log) or the best derivation's spans (max)."""
    ring = as_semiring(semiring)
    if ring.name not in ("log", "max"):  # the rule contractions below are written for these two
        raise ValueError(f"the PCFG chart runs in the log or the max semiring, not {ring!r}")
    terms = grammar.terms.transpose(0, 1)  # (N, B, T)
    n_words, batch = terms.shape[0], terms.shape[1]
    log = ring.name == "log"
    if log:
        blocks = {name: block.exp() for name, block in grammar.blocks().items()}
        term_shift = terms.detach().amax(-1, keepdim=True)
        term_probs = torch.exp(terms - term_shift)
        first_word = _word_matrices(term_probs, blocks["tn"], word_first=True)
        last_word = _word_matrices(term_probs, blocks["nt"], word_first=False)
        combine = _combine_log
    else:
        blocks = grammar.blocks()
        first_word = _word_matrices_max(terms, blocks["tn"], word_first=True)
        last_word = _word_matrices_max(terms, blocks["nt"], word_first=False)
        combine = _combine_max
    chart = SpanChart(n_words, batch, (grammar.nt,), terms)  # nonterminals of the spans of width ≥ 2

    def build(w: int) -> torch.Tensor:
        """The nonterminal items of every span of width w: the splits with a one-word side read the words'
        preterminals, the others the chart."""
        n = chart.spans(w)
        if w == 2:
            return combine(terms[:n].unsqueeze(1), terms[1:n + 1].unsqueeze(1), blocks["tt"])
        shorter = chart.by_start[w - 1]  # one read of the chart (its backward is a chart-sized buffer), then cut
        rest, head = shorter[1:n + 1], shorter[:n]  # words i+1 .. j−1 and i .. j−2
        last = slice(w - 1, w - 1 + n)  # the span's last word
        if log:
            parts = [_with_word(first_word[:n], term_shift[:n], rest),
                     _with_word(last_word[last], term_shift[last], head)]
        else:
            parts = [_with_word_max(first_word[:n], rest), _with_word_max(last_word[last], head)]
        if w >= 4:  # both sides at least two words: left widths 2 .. w−2 paired with right widths w−2 .. 2
            left, right = chart.splits(w, 2)  # (n, w−3, B, NT) each
            parts.append(combine(left, right, blocks["nn"]))
        return ring.sum(torch.stack(parts), 0)

    cky(chart, range(2, n_words + 1), build, span_weights)
    return _total(grammar, chart, ring)


def _total(grammar: Grammar, chart: SpanChart, semiring: Semiring) -> torch.Tensor:
    """Root score + the whole sentence's nonterminal entry, per sentence; −inf below two words."""
    by_start = chart.by_start
    lengths = grammar.lengths.to(by_start.device)
    batch, n_words = by_start.shape[2], chart.n_words
    derivable = lengths >= 2
    if n_words < 2:  # nothing derivable; still tied to the graph so a loss over it can be backpropagated
        tied = 0.0 * (grammar.root.sum() + grammar.terms.sum())
        return torch.full((batch,), float("-inf"), dtype=by_start.dtype, device=by_start.device) + tied
    whole = chart.whole(lengths, 2)  # (B, NT): the span (0, length)
    total = semiring.sum(whole + grammar.root, -1)
    return torch.where(derivable, total, torch.full_like(total, float("-inf")))


def span_gradients(grammar: Grammar, semiring: Semiring | SemiringName) -> torch.Tensor:
    """(B, N+1, N+1): each span's posterior marginal (log) or its 0/1 membership in the best derivation (max);
    only spans of width ≥ 2 inside their sentence are non-zero.  The grammar is read as constants."""
    batch, n_words = grammar.terms.shape[:2]
    with torch.inference_mode(False), torch.enable_grad():
        constant = Grammar(*(t.detach().clone() for t in (grammar.root, grammar.rules, grammar.terms)),
                           lengths=grammar.lengths.clone())
        weights = constant.terms.new_zeros(batch, n_words + 1, n_words + 1, requires_grad=True)
        total = inside(constant, semiring, weights)
        total = torch.where(torch.isfinite(total), total, torch.zeros_like(total)).sum()
        if not total.requires_grad:  # no sentence of two words or more
            return weights.detach().clone()
        (grad,) = torch.autograd.grad(total, [weights])
    return grad


def best_span_tree(weights: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(B, N+1, N+1) 0/1: the spans of the binary bracketing with the largest total ``weights`` (B, N+1, N+1) over
    its spans of width ≥ 2 (the shared CKY; with posterior span marginals as weights this is the
    minimum-Bayes-risk tree)."""
    return BinaryTrees(weights, lengths).argmax()


def split_distances(selected: torch.Tensor, n: int) -> torch.Tensor:
    """Split distances (n−1) from which the shared tree builder (split at the largest, recursively) rebuilds the
    binary bracketing ``selected`` ((≥ n+1, ≥ n+1) 0/1 over fenceposts): the boundary between words k−1 and k gets
    the width of the smallest chosen span holding both words — the node that splits there, wider than every node
    below it, so each span's own split point is its unique maximum."""
    if n < 2:
        return torch.zeros(0, dtype=torch.promote_types(selected.dtype, torch.float32))
    chosen = selected[: n + 1, : n + 1] > 0.5
    fence = torch.arange(n + 1)
    dtype = torch.promote_types(selected.dtype, torch.float32)  # a float64 model's distances stay float64
    width = (fence.unsqueeze(0) - fence.unsqueeze(1)).to(dtype)  # [i, j] = j − i
    width = torch.where(chosen, width, torch.full_like(width, float("inf")))
    boundary = torch.arange(1, n).view(-1, 1, 1)
    contains = (fence.view(1, -1, 1) < boundary) & (fence.view(1, 1, -1) > boundary)  # i < k < j
    return torch.where(contains, width.unsqueeze(0), torch.full_like(contains, float("inf"), dtype=dtype)
                       ).amin(dim=(1, 2))
