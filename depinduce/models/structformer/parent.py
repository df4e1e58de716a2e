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

Numerics: the work is done in float64 with the scores centred on the midpoint of the sentence's range of
s1·h, so e_j ≤ exp(R/2) and W ≤ exp(R/2) for R = s1 × (the sentence's height range): both are exact while
R ≤ 1400 (exp(700) is finite with room for sums).  Z is accumulated with ``logcumsumexp`` per span start rather
than as a difference of prefix sums, which would cancel catastrophically.

A sentence with R > 1400 (a sharp s1 or a wide height range) would overflow e_j or W; clamping them, as an
earlier version did, left P wrong by up to 1.0 without a word.  Such sentences take an exact fallback instead
(:func:`_wide_parent`): the same two sums regrouped so that every exponent is a log-softmax value ≤ 0,

    j ≥ i:  P[i, j] = Σ_{r ≥ j} p_R[i, r] h[i, r] exp(c_j − log Z[i, r]),
            h[i, r] = Σ_{l ≤ i} p_L[i, l] Z[i, r] / Z[l, r]                       (each ratio ≤ 1)
    j < i:  P[i, j] = Σ_{l ≤ j} p_L[i, l] k[i, l] exp(c_j − log Z[l, i]),
            k[i, l] = Σ_{r ≥ i} p_R[i, r] Z[l, i] / Z[l, r]                       (each ratio ≤ 1)

with c = s1·h.  It is O(n³) in time and in temporaries per sentence (elementwise, not matrix products: forward
and backward of one sentence took 7× the fast path's time at n = 40 and 35× at n = 100 on CPU), computed over
row blocks and recomputed in backward, so only the affected sentences pay for it.  The authors' float32 O(n⁴) softmax has no such limit, so neither has this.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

# exp(±700) is finite in float64 with room for sums of n such terms: the fast path's bound on centred scores
# (sentences beyond it take the exact fallback, so its clamps never bind on a value that is kept).
_MAX_EXPONENT = 700.0
_NEG_EXPONENT = -1e4


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

    # Centred head scores; padding gets a finite placeholder (spans reaching padding have zero weight).
    scores = head_sharpness.to(work) * height.to(work)
    low = scores.masked_fill(~mask, torch.inf).amin(dim=-1, keepdim=True)
    high = scores.masked_fill(~mask, -torch.inf).amax(dim=-1, keepdim=True)
    low = torch.where(torch.isfinite(low), low, torch.zeros_like(low)).detach()
    high = torch.where(torch.isfinite(high), high, torch.zeros_like(high)).detach()
    centred = torch.where(mask, scores, low) - (low + high) / 2
    # Sentences whose exponents would leave float64's range take the exact fallback; the fast path sees tame
    # placeholder scores for them, so its discarded values (and their zero gradients) stay finite.
    wide = (high - low).squeeze(-1) > 2 * _MAX_EXPONENT
    if torch.compiler.is_compiling():  # train.compile: the device decides, without a read by the host
        parent = torch.cond(wide.any(), _with_wide_rows, _without_wide_rows, (p_left, p_right, centred, wide))
    elif bool(wide.any()):
        parent = _fast_parent(p_left, p_right, centred.masked_fill(wide[:, None], 0.0))
        rows = wide.nonzero().squeeze(-1)
        parent = parent.index_copy(0, rows, _wide_parent(p_left[rows], p_right[rows], centred[rows]))
    else:
        parent = _fast_parent(p_left, p_right, centred)

    root = parent.diagonal(dim1=1, dim2=2) * mask
    pair_real = mask[:, :, None] & mask[:, None, :]
    parent = parent.masked_fill(~pair_real | torch.eye(width, dtype=torch.bool, device=parent.device), 0.0)
    return parent.to(out_dtype), root.to(out_dtype)


def _with_wide_rows(p_left: torch.Tensor, p_right: torch.Tensor, centred: torch.Tensor,
                    wide: torch.Tensor) -> torch.Tensor:
    """Under ``torch.compile``: P where some sentence is wide, the fallback computed for every row (a batch's
    row count may not depend on the data in a compiled graph) and taken for the wide ones."""
    fast = _fast_parent(p_left, p_right, centred.masked_fill(wide[:, None], 0.0))
    return torch.where(wide[:, None, None], _wide_parent(p_left, p_right, centred), fast)


def _without_wide_rows(p_left: torch.Tensor, p_right: torch.Tensor, centred: torch.Tensor,
                       wide: torch.Tensor) -> torch.Tensor:
    return _fast_parent(p_left, p_right, centred)


def _fast_parent(p_left: torch.Tensor, p_right: torch.Tensor, centred: torch.Tensor) -> torch.Tensor:
    """P with its diagonal (the root mass) by the two batched matmuls; exact while every sentence's centred
    scores lie within ±700."""
    width = centred.size(-1)
    index = torch.arange(width, device=centred.device)
    in_span = index[None, :] >= index[:, None]  # [l, k]: word k at or right of span start l
    span_logits = centred[:, None, :].masked_fill(~in_span, _NEG_EXPONENT)
    log_z = torch.logcumsumexp(span_logits, dim=-1)  # log Z[l, r] (junk for r < l)
    inv_z = torch.exp(torch.where(in_span, -log_z, _NEG_EXPONENT).clamp(max=_MAX_EXPONENT))
    word_score = torch.exp(centred.clamp(max=_MAX_EXPONENT))  # e_j

    upper = (p_right * torch.bmm(p_left, inv_z)).flip(-1).cumsum(-1).flip(-1)
    lower = (p_left * torch.bmm(p_right, inv_z.transpose(1, 2))).cumsum(-1)
    return word_score[:, None, :] * torch.where(in_span, upper, lower)


# Row block of the fallback: about this many elements per (rows, n, n) temporary.
_WIDE_BLOCK_ELEMENTS = 1 << 22


def _wide_parent(p_left: torch.Tensor, p_right: torch.Tensor, centred: torch.Tensor) -> torch.Tensor:
    """P with its diagonal for sentences of any score range (see the module docstring), in row blocks; under
    autograd each block is recomputed in backward rather than its (rows, n, n) temporaries kept."""
    batch, width = centred.shape
    index = torch.arange(width, device=centred.device)
    # log Z[l, r] for r ≥ l; the words left of l get a score far below every real one (a fixed −1e4 would not
    # do: here the scores themselves may lie below it).
    floor = centred.amin(dim=-1, keepdim=True).detach() - 1e4
    span_logits = torch.where(index[None, :] >= index[:, None], centred[:, None, :], floor[:, :, None])
    log_z = torch.logcumsumexp(span_logits, dim=-1)
    step = max(1, _WIDE_BLOCK_ELEMENTS // max(1, batch * width * width))
    blocks = []
    for start in range(0, width, step):
        rows = index[start : start + step]
        args = (p_left[:, rows], p_right[:, rows], centred, log_z, rows)
        if torch.is_grad_enabled() and not torch.compiler.is_compiling() and any(t.requires_grad for t in args[:4]):
            blocks.append(checkpoint(_wide_rows, *args, use_reentrant=False))
        else:
            blocks.append(_wide_rows(*args))
    return torch.cat(blocks, dim=1)


def _wide_rows(p_left: torch.Tensor, p_right: torch.Tensor, centred: torch.Tensor, log_z: torch.Tensor,
               rows: torch.Tensor) -> torch.Tensor:
    """Rows ``rows`` of the fallback's P: ``p_left``/``p_right`` (B, rows, n), ``log_z`` (B, n, n)."""
    index = torch.arange(centred.size(-1), device=centred.device)
    i = rows[:, None, None]
    first, second = index[None, :, None], index[None, None, :]  # the two trailing axes

    def exp_where(valid: torch.Tensor, exponent: torch.Tensor) -> torch.Tensor:
        return exponent.masked_fill(~valid, -torch.inf).exp()

    z_from_i = log_z[:, rows]  # [b, i, r] = log Z[i, r]
    z_to_i = log_z[:, :, rows].transpose(1, 2)  # [b, i, l] = log Z[l, i]
    # j ≥ i.  h[i, r] = Σ_l p_L[i, l] Z[i, r] / Z[l, r] over (i, l, r).
    ratio = exp_where((first <= i) & (second >= i), z_from_i[:, :, None, :] - log_z[:, None, :, :])
    h = (p_left[:, :, :, None] * ratio).sum(dim=2)
    # [b, i, j, r] = exp(c_j − log Z[i, r]) for i ≤ j ≤ r
    softmax = exp_where((first >= i) & (second >= first), centred[:, None, :, None] - z_from_i[:, :, None, :])
    upper = torch.einsum("bir,bijr->bij", p_right * h, softmax)
    # j < i.  k[i, l] = Σ_r p_R[i, r] Z[l, i] / Z[l, r] over (i, l, r).
    ratio = exp_where((first <= i) & (second >= i), z_to_i[:, :, :, None] - log_z[:, None, :, :])
    k = (p_right[:, :, None, :] * ratio).sum(dim=3)
    # [b, i, j, l] = exp(c_j − log Z[l, i]) for l ≤ j < i
    softmax = exp_where((first < i) & (second <= first), centred[:, None, :, None] - z_to_i[:, :, None, :])
    lower = torch.einsum("bil,bijl->bij", p_left * k, softmax)
    return upper + lower
