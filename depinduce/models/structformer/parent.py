"""The differentiable parent distribution P[i, j] = p(word j is the parent of word i) (paper section 4.2).

Definitions (per sentence; d_k is the boundary between words k and k+1, h_i a word's height)::

    γ[i, k]      = σ(s0 (h_i − d_k))                   word i's constituent crosses boundary k
    P(L_i ≤ l)   = min_{l ≤ k < i} γ[i, k]  (1 if l = i)  its left end is at l or further left
    p_L[i, l]    = P(L_i ≤ l) − P(L_i ≤ l − 1)
    P(R_i ≥ r)   = min_{i ≤ k < r} γ[i, k]  (1 if r = i),  p_R[i, r] = P(R_i ≥ r) − P(R_i ≥ r + 1)
    p_head[l, r, j] = exp(s1 h_j) / Z[l, r]  for l ≤ j ≤ r,  Z[l, r] = Σ_{l ≤ k ≤ r} exp(s1 h_k)
    P[i, j]      = Σ_{l ≤ i ≤ r} p_L[i, l] p_R[i, r] p_head[l, r, j],  then P[i, i] := 0

The removed diagonal mass is the probability that word i heads its own constituent: its root probability.

Why this costs O(n³) matrix products instead of the authors' O(n⁴) contraction over (n, n, n) tensors:
write e_j = exp(s1 h_j) and W[l, r] = 1 / Z[l, r] (0 for l > r).  Because p_L[i, ·] vanishes right of i and
p_R[i, ·] left of i, the span condition l ≤ j ≤ r reduces to r ≥ j when j ≥ i and to l ≤ j when j < i, so

    j ≥ i:  P[i, j] = e_j Σ_{r ≥ j} p_R[i, r] (p_L W)[i, r]        (one batched matmul, one reverse cumsum)
    j < i:  P[i, j] = e_j Σ_{l ≤ j} p_L[i, l] (p_R Wᵀ)[i, l]       (one batched matmul, one cumsum)

Memory is a handful of (B, n, n) tensors: a 300-word sentence needs under 10 MB.

Numerics (the work is done in float64).  The fast path takes the sentences whose scores c = s1·h lie within ±600
(±200 under ``train.compile``, where it is plain ops).  It computes e_j = exp(c_j) as they are, Z[l, r] per span
start as a cumulative sum of positive terms (no cancellation) and W = 1/Z with its own backward
(:class:`_InverseSpanSums`, ordered so that no intermediate overflows: exp(600) leaves a factor 10⁴⁸ of room for
sums).  No score is shifted and no partition function goes through a logarithm: c_j − (a constant) rounds where the
two differ in magnitude, and log Z ≈ 700 carries a rounding error of 1e-13, which exp turns into a relative error
of 1e-13 (an earlier version centred the scores and took ``logcumsumexp``, whose backward also cancels a positive
and a negative part: gradients were 1e-11 off).  Its values and gradients are the authors' function to float64's
rounding in absolute terms (within 1e-15 of a 50-digit reference, ``tests/test_structformer.py``); only where every
span's softmax is one-hot to float64 (scores hundreds apart) does a gradient the authors get as exactly 0 come out
as ~1e-16.

Every other sentence (a sharp s1 or a large height, where e_j or W would leave float64) takes the exact fallback
(:func:`_wide_parent`): the definition's sum as the authors contract it, P[i, j] = Σ_l p_L[i, l] Σ_r p_R[i, r]
q[l, r, j] with q[l, r, ·] torch's softmax over the span (which subtracts the span's own maximum), so its values
and gradients have the authors' numerics, down to the exact zeros (clamping the exponents instead, as an early
version did, left P wrong by up to 1.0 without a word).  It takes O(n⁴) products and O(n³) temporaries per
sentence, computed over blocks of span starts and recomputed in backward (forward and backward of one sentence
took 7× the fast path's time at n = 40 and 40× at n = 100 on CPU), so only the affected sentences pay for it.  The
authors' O(n⁴) softmax has no range limit, so neither has this.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

# The fast path's bound on |s1·h|: exp(±600) is finite in float64 with a factor 10⁴⁸ of room for sums of products
# (sentences beyond it take the exact fallback).  Under torch.compile (train.compile) the fast path is plain ops,
# whose backward squares the partition functions: ±200 keeps that finite.
_MAX_EXPONENT = 600.0
_COMPILED_MAX_EXPONENT = 200.0


def span_boundaries(
    distance: torch.Tensor, height: torch.Tensor, sharpness: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``p_left[b, i, l]`` and ``p_right[b, i, r]``: where the smallest constituent of word i starts and ends.

    Rows sum to one; ``p_left`` is zero for l > i and ``p_right`` for r < i.  A +BIG distance (after the last
    word, padding) can never be crossed, so a real word's constituent never reaches padding.
    """
    width = distance.size(-1)
    index = torch.arange(width, device=distance.device)
    before = index[None, :] < index[:, None]  # [i, k]: boundary k lies left of word i
    crosses = torch.sigmoid(sharpness * (height[:, :, None] - distance[:, None, :]))
    one = crosses.new_ones(())

    left_at_or_before = torch.where(before, crosses, one).flip(-1).cummin(-1).values.flip(-1)
    p_left = left_at_or_before - F.pad(left_at_or_before[..., :-1], (1, 0))

    right_at_or_after = F.pad(torch.where(before, one, crosses)[..., :-1], (1, 0), value=1.0).cummin(-1).values
    p_right = right_at_or_after - F.pad(right_at_or_after[..., 1:], (0, 1))
    return p_left, p_right



def parent_distribution(
    distance: torch.Tensor,
    height: torch.Tensor,
    mask: torch.Tensor,
    sharpness: torch.Tensor,
    head_sharpness: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``parent`` (B, T, T) with P[i, j] as above (zero diagonal, zero padding rows and columns) and ``root``
    (B, T), the diagonal mass removed from each row (zero at padding), both in ``distance``'s dtype.

    ``distance`` (B, T) has +BIG after each sentence's last word and at padding, ``height`` (B, T) is −BIG at
    padding; ``sharpness`` = s0 and ``head_sharpness`` = s1 are the (positive) inverse temperatures.
    """
    out_dtype = distance.dtype
    batch, width = distance.shape
    if width == 0:
        return distance.new_zeros((batch, 0, 0)), distance.new_zeros((batch, 0))
    work = torch.float64
    p_left, p_right = span_boundaries(distance.to(work), height.to(work), sharpness.to(work))

    # Head scores; padding gets a finite placeholder (spans reaching padding have zero weight).
    scores = torch.where(mask, head_sharpness.to(work) * height.to(work), 0.0)
    # Sentences whose scores leave the fast path's range take the exact fallback; the fast path sees tame
    # placeholder scores for them, so its discarded values (and their zero gradients) stay finite.
    bound = _COMPILED_MAX_EXPONENT if torch.compiler.is_compiling() else _MAX_EXPONENT
    wide = (scores.detach().abs() > bound).any(dim=-1)
    if torch.compiler.is_compiling():  # train.compile: the device decides, without a read by the host
        parent = torch.cond(wide.any(), _with_wide_rows, _without_wide_rows, (p_left, p_right, scores, wide))
    elif bool(wide.any()):
        parent = _fast_parent(p_left, p_right, scores.masked_fill(wide[:, None], 0.0))
        rows = wide.nonzero().squeeze(-1)
        parent = parent.index_copy(0, rows, _wide_parent(p_left[rows], p_right[rows], scores[rows]))
    else:
        parent = _fast_parent(p_left, p_right, scores)

    root = parent.diagonal(dim1=1, dim2=2) * mask
    pair_real = mask[:, :, None] & mask[:, None, :]
    parent = parent.masked_fill(~pair_real | torch.eye(width, dtype=torch.bool, device=parent.device), 0.0)
    return parent.to(out_dtype), root.to(out_dtype)


def _with_wide_rows(p_left: torch.Tensor, p_right: torch.Tensor, scores: torch.Tensor,
                    wide: torch.Tensor) -> torch.Tensor:
    """Under ``torch.compile``: P where some sentence is wide, the fallback computed for every row (a batch's
    row count may not depend on the data in a compiled graph) and taken for the wide ones."""
    fast = _fast_parent(p_left, p_right, scores.masked_fill(wide[:, None], 0.0))
    return torch.where(wide[:, None, None], _wide_parent(p_left, p_right, scores), fast)


def _without_wide_rows(p_left: torch.Tensor, p_right: torch.Tensor, scores: torch.Tensor,
                       wide: torch.Tensor) -> torch.Tensor:
    return _fast_parent(p_left, p_right, scores)


class _InverseSpanSums(torch.autograd.Function):
    """W[l, r] = 1 / Z[l, r], Z[l, r] = Σ_{l ≤ k ≤ r} exp(c_k) (0 for r < l), for scores |c| ≤ 600 (B, n).

    Z is a cumulative sum of positive terms per span start (no cancellation).  Backward: ∂W[l, r]/∂c_k =
    −W[l, r]² e_k for l ≤ k ≤ r, summed as e_k Σ_{l ≤ k} Σ_{r ≥ k} (−(G W)[l, r] W[l, r]): autograd's own order
    (G·W², then the sums) would square W up to exp(1200) and overflow, and a logarithmic form loses 1e-13."""

    @staticmethod
    def forward(ctx, scores: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def, override]
        width = scores.size(-1)
        index = torch.arange(width, device=scores.device)
        in_span = index[None, :] >= index[:, None]  # [l, r]
        e = scores.exp()
        sums = (e[:, None, :] * in_span).cumsum(dim=-1)
        inverse = torch.where(in_span, 1.0 / sums.masked_fill(~in_span, 1.0), 0.0)
        ctx.save_for_backward(e, inverse)
        return inverse

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def, override]
        e, inverse = ctx.saved_tensors
        width = e.size(-1)
        index = torch.arange(width, device=e.device)
        in_span = index[None, :] >= index[:, None]
        weighted = (grad * inverse).mul_(inverse).neg_()  # ∂L/∂Z[l, r]; 0 for r < l
        tails = weighted.flip(-1).cumsum(dim=-1).flip(-1).masked_fill_(~in_span, 0.0)  # [l, k]: Σ_{r ≥ k}
        return (tails * e[:, None, :]).sum(dim=1)


def _fast_parent(p_left: torch.Tensor, p_right: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """P with its diagonal (the root mass) by the two batched matmuls, for scores within ±600."""
    width = scores.size(-1)
    index = torch.arange(width, device=scores.device)
    in_span = index[None, :] >= index[:, None]  # [l, k]: word k at or right of span start l
    if torch.compiler.is_compiling():  # plain ops, which the compiler traces (scores within ±200, see above)
        sums = (scores.exp()[:, None, :] * in_span).cumsum(dim=-1)
        inv_z = torch.where(in_span, 1.0 / sums.masked_fill(~in_span, 1.0), 0.0)
    else:
        inv_z = _InverseSpanSums.apply(scores)
    word_score = scores.exp()  # e_j

    upper = (p_right * torch.bmm(p_left, inv_z)).flip(-1).cumsum(-1).flip(-1)
    lower = (p_left * torch.bmm(p_right, inv_z.transpose(1, 2))).cumsum(-1)
    return word_score[:, None, :] * torch.where(in_span, upper, lower)


# Block of the fallback: about this many elements per (starts, n, n) temporary.
_WIDE_BLOCK_ELEMENTS = 1 << 22


def _wide_parent(p_left: torch.Tensor, p_right: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """P with its diagonal for sentences of any score range: the definition's sum as the authors contract it,
    P[i, j] = Σ_l p_L[i, l] Σ_r p_R[i, r] q[l, r, j] with q[l, r, ·] the softmax of the span [l, r]'s scores
    (torch's softmax, which subtracts the span's own maximum: the authors' numerics, values and gradients), in
    blocks of span starts (O(n⁴) products, O(n³) temporaries per block's worth); under autograd each block is
    recomputed in backward rather than its (starts, n, n) temporaries kept."""
    batch, width = scores.shape
    index = torch.arange(width, device=scores.device)
    step = max(1, _WIDE_BLOCK_ELEMENTS // max(1, batch * width * width))
    parent = None
    for start in range(0, width, step):
        starts = index[start : start + step]
        args = (p_left[:, :, starts], p_right, scores, starts)
        block = (checkpoint(_wide_block, *args, use_reentrant=False)
                 if torch.is_grad_enabled() and not torch.compiler.is_compiling()
                 and any(t.requires_grad for t in args[:3]) else _wide_block(*args))
        parent = block if parent is None else parent + block
    assert parent is not None
    return parent


def _wide_block(p_left: torch.Tensor, p_right: torch.Tensor, scores: torch.Tensor,
                starts: torch.Tensor) -> torch.Tensor:
    """The span starts ``starts``' share of P: Σ_{l ∈ starts} p_L[i, l] Σ_r p_R[i, r] q[l, r, j], with
    ``p_left`` (B, n, starts) their columns of p_L."""
    index = torch.arange(scores.size(-1), device=scores.device)
    l = starts[:, None, None]
    r, j = index[None, :, None], index[None, None, :]
    in_span = (j >= l) & (j <= r)  # [l, r, j]; spans with r < l are empty: their rows are never weighted
    logits = scores[:, None, None, :].masked_fill(~in_span, -torch.inf)
    q = torch.softmax(logits.masked_fill(~(r >= l), 0.0), dim=-1).masked_fill(~(r >= l), 0.0)  # (B, l, r, j)
    through = torch.matmul(p_right[:, None], q)  # [b, l, i, j] = Σ_r p_R[i, r] q[l, r, j]
    return torch.einsum("bil,blij->bij", p_left, through)
