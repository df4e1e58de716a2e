"""Dependency-constrained self-attention and the pre-LayerNorm transformer block (paper section 4.3).

Each head mixes the parent and dependent relations, M = w_parent·P + w_dep·Pᵀ with (w_parent, w_dep) =
softmax(ρ) per layer and head, and replaces softmax attention by independent gates:
weights[i, j] = sigmoid(q_i·k_j/√d_h) · M[i, j], then attention dropout, then ·V.  Padding keys get weight zero
because P has zero rows and columns at padding (``parent_distribution`` guarantees it), so no separate key mask
is needed.

Memory (CPU): the (B, heads, T, T) gates, relations and weights are not kept for backward but recomputed from
the q/k/v projection and P (one extra q·kᵀ product per layer); dropout masks are kept as bits (layers/dropout.py); each
residual sum is written over its branch's output; the feed-forward block may recompute its inner activation
(``recompute_ffn``).  Every stored activation thus takes the place of a temporary, which keeps the heap compact.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from depinduce.models.layers.dropout import (
    KeptMask,
    apply_dropout,
    apply_mask_,
    drop_mask,
    leaky_relu_dropout_,
    new_seed,
    residual_dropout_,
)
from depinduce.models.layers.kernels import autocast_off, linear_backward, norm_linear, plain_ops, position_linear


def _head_major(qkv: torch.Tensor, n_heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The fused projection (B, T, 3·H) → q, k, v as (heads·B, T, d) tensors, in one copy (``unbind``: under
    autograd its backward is one ``stack``, where indexing's would zero-fill a block per part)."""
    batch, width, three_hidden = qkv.shape
    dim = three_hidden // (3 * n_heads)
    q, k, v = qkv.view(batch, width, 3, n_heads, dim).permute(2, 3, 0, 1, 4).reshape(3, -1, width, dim).unbind(0)
    return q, k, v


def _parent_pair(parent: torch.Tensor) -> torch.Tensor:
    """(P, Pᵀ) as a (2, B·T·T) matrix: each head's relation is one row of mixture · this."""
    return torch.stack((parent, parent.transpose(1, 2))).view(2, -1)


def _heads_to_positions(context: torch.Tensor, n_heads: int, batch: int) -> torch.Tensor:
    """Head-major (heads·B, T, d) → (B, T, heads·d)."""
    _, width, dim = context.shape
    return context.view(n_heads, batch, width, dim).permute(1, 2, 0, 3).reshape(batch, width, n_heads * dim)


class _AttentionCore(torch.autograd.Function):
    """out(dropout(sigmoid(q·kᵀ·scale) ⊙ M) · v) from the fused q/k/v projection (B, T, 3·H), keeping only
    that projection and P.

    All heads at once: q, k and v are copied once into a head-major (3, heads, B, T, d) block, so every product
    is one batched matmul over heads × sentences and every elementwise step one op over (heads, B, T, T) — a
    few dozen ops per layer and pass where a loop over heads issued hundreds.  Backward recomputes the gates,
    relations and weights (one more q·kᵀ product per layer) instead of storing (heads, B, T, T) tensors between
    forward and backward.  With ``rows`` (boolean B × T) the output projection runs at those positions only,
    giving (1, N, H).
    """

    @staticmethod
    def forward(ctx: Any, qkv: torch.Tensor, parent: torch.Tensor, mixture: torch.Tensor, out_weight: torch.Tensor,
                out_bias: torch.Tensor, n_heads: int, p: float, seed: int | None,
                rows: torch.Tensor | None) -> torch.Tensor:
        drop = None if seed is None else drop_mask((n_heads, *parent.shape), p, seed)
        heads = _Heads(qkv, parent, mixture, n_heads, p, drop)
        ctx.n_heads, ctx.p, ctx.rows = n_heads, p, rows
        ctx.kept = None if drop is None else KeptMask(drop)
        ctx.save_for_backward(qkv, parent, mixture, out_weight)
        context = heads.context(heads.weights()[0])
        return position_linear(_at_rows(context, rows), out_weight, out_bias)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        qkv, parent, mixture, out_weight = ctx.saved_tensors
        heads = _Heads(qkv, parent, mixture, ctx.n_heads, ctx.p, None if ctx.kept is None else ctx.kept.unpack())
        n_heads, batch, width, dim = heads.shape
        weights, gates, relation = heads.weights()
        rows = ctx.rows
        grad_context, grad_out_weight, grad_out_bias = linear_backward(
            grad.contiguous(), _at_rows(heads.context(weights), rows), out_weight
        )
        if rows is not None:  # positions the projection did not read get no gradient
            grad_context = grad_context.new_zeros((batch, width, grad_context.size(-1))).index_put_(
                (rows,), grad_context[0])
        # (B, T, heads·d) → head-major (heads·B, T, d)
        grad_context = grad_context.view(batch, width, n_heads, dim).permute(2, 0, 1, 3).reshape(-1, width, dim)
        grad_parts = qkv.new_empty((3, n_heads * batch, width, dim))  # grad q, k, v, head-major
        torch.bmm(weights.transpose(1, 2), grad_context, out=grad_parts[2])
        del weights
        grad_weights = torch.bmm(grad_context, heads.v.transpose(1, 2))
        del grad_context
        if heads.drop is not None:
            apply_mask_(grad_weights, heads.drop, ctx.p)
        grad_relation = (grad_weights * gates).view(n_heads, -1)
        # M = mixture · (P, Pᵀ): the sums over heads and the dot products per head are one product each
        grad_mixture = torch.mm(grad_relation, heads.parent_pair.t())
        grad_pair = torch.mm(heads.mixture.t(), grad_relation).view(2, batch, width, width)
        grad_parent = grad_pair[0].add_(grad_pair[1].transpose(1, 2))
        del grad_relation, grad_pair
        # d sigmoid = g (1 − g); computed in place on tensors that are no longer needed.
        grad_scores = grad_weights.mul_(relation).mul_(gates).mul_(gates.neg_().add_(1.0))
        grad_scores.mul_(heads.scale)
        torch.bmm(grad_scores, heads.k, out=grad_parts[0])
        torch.bmm(grad_scores.transpose(1, 2), heads.q, out=grad_parts[1])
        del grad_scores
        # head-major (3, heads, B, T, d) → (B, T, 3·heads·d), the projection's layout
        grad_qkv = grad_parts.view(3, n_heads, batch, width, dim).permute(2, 3, 0, 1, 4).reshape(qkv.shape)
        return (grad_qkv, grad_parent, grad_mixture.to(mixture.dtype), grad_out_weight, grad_out_bias,
                None, None, None, None)


def _at_rows(x: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
    """``x`` (B, T, C) itself, or its rows that ``rows`` (boolean B × T) selects as a (1, N, C) tensor."""
    return x if rows is None else x[rows].unsqueeze(0)


class _Heads:
    """Head-major copies of a fused q/k/v projection and the attention weights of all heads (no autograd)."""

    def __init__(self, qkv: torch.Tensor, parent: torch.Tensor, mixture: torch.Tensor, n_heads: int, p: float,
                 drop: torch.Tensor | None) -> None:
        """``drop``: the attention dropout's mask (heads, B, T, T), or None."""
        batch, width, three_hidden = qkv.shape
        dim = three_hidden // (3 * n_heads)
        self.shape = (n_heads, batch, width, dim)
        self.q, self.k, self.v = _head_major(qkv, n_heads)
        self.scale = dim**-0.5
        self.parent_pair = _parent_pair(parent)
        self.mixture = mixture.to(parent.dtype)
        self.p = p
        self.drop = None if drop is None else drop.view(-1, width, width)

    def weights(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(weights after dropout, sigmoid gates, relation M) of every head, each (heads·B, T, T)."""
        gates = torch.bmm(self.q, self.k.transpose(1, 2)).mul_(self.scale).sigmoid_()
        relation = torch.mm(self.mixture, self.parent_pair).view_as(gates)  # w_parent[h]·P + w_dep[h]·Pᵀ
        weights = gates * relation
        if self.drop is not None:
            apply_mask_(weights, self.drop, self.p)
        return weights, gates, relation

    def context(self, weights: torch.Tensor) -> torch.Tensor:
        """weights · v of every head, as (B, T, heads·d)."""
        return _heads_to_positions(torch.bmm(weights, self.v), self.shape[0], self.shape[1])


def _fused_attention_supported(qkv: torch.Tensor) -> bool:
    """The fused core draws its dropout masks on CPU; elsewhere (and under autocast) plain autograd ops
    do the work."""
    return not plain_ops(qkv)


class DependencyAttention(nn.Module):
    """Multi-head attention whose weights are gated by the soft dependency graph instead of a softmax.

    The module's input is the (pre-LayerNorm) residual stream; the block's LayerNorm is applied here, fused with
    the q/k/v projection.
    """

    def __init__(self, hidden_size: int, n_heads: int, dropatt: float) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = hidden_size // n_heads
        self.dropatt = dropatt
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size)  # one matmul for q, k and v
        self.out = nn.Linear(hidden_size, hidden_size)
        for weight in self.qkv.weight.data.chunk(3, dim=0):  # Xavier per projection, as the authors do
            nn.init.xavier_uniform_(weight)
        nn.init.xavier_uniform_(self.out.weight)
        nn.init.zeros_(self.qkv.bias)
        nn.init.zeros_(self.out.bias)

    def forward(self, x: torch.Tensor, norm: nn.LayerNorm, parent: torch.Tensor, mixture: torch.Tensor,
                rows: torch.Tensor | None = None) -> torch.Tensor:
        """``x`` (B, T, H), ``parent`` (B, T, T), ``mixture`` (n_heads, 2) = (w_parent, w_dep) per head; returns a
        fresh (B, T, H) tensor, or with ``rows`` (boolean B × T) the (1, N, H) outputs at those positions only
        (every position is still attended to)."""
        qkv = norm_linear(x, norm, self.qkv)
        parent = parent.to(qkv.dtype)
        if not _fused_attention_supported(qkv):
            return position_linear(_at_rows(self._plain_context(qkv, parent, mixture), rows), self.out.weight,
                                   self.out.bias)
        seed = new_seed() if self.training and self.dropatt > 0.0 else None
        return _AttentionCore.apply(qkv, parent, mixture, self.out.weight, self.out.bias, self.n_heads,
                                    self.dropatt, seed, rows)

    def _plain_context(self, qkv: torch.Tensor, parent: torch.Tensor, mixture: torch.Tensor) -> torch.Tensor:
        """The attention's context (B, T, H) by torch's autograd ops (other devices, autocast, ``torch.compile``),
        laid out as the CPU core lays it: q, k and v head-major in one copy, so that each product is one batched
        matmul over heads × sentences, and M of every head one (heads, 2) × (2, B·T·T) product."""
        batch, width, _ = qkv.shape
        q, k, v = _head_major(qkv, self.n_heads)
        gates = torch.baddbmm(q.new_empty(()), q, k.transpose(1, 2), beta=0.0, alpha=self.head_dim**-0.5).sigmoid()
        work = torch.promote_types(parent.dtype, torch.float32)  # under bf16 autocast M stays float32, as it was
        with autocast_off(qkv):
            relation = torch.mm(mixture.to(work), _parent_pair(parent).to(work)).view_as(gates)
        weights = apply_dropout(gates * relation, self.dropatt, self.training)
        return _heads_to_positions(torch.bmm(weights, v), self.n_heads, batch)


class StructFormerLayer(nn.Module):
    """x + Drop(Attn(LN(x))), then x + Drop(FFN(LN(x))) with FFN = Linear → LeakyReLU → Dropout → Linear."""

    def __init__(
        self, hidden_size: int, n_heads: int, ff_size: int, dropout: float, dropatt: float, leaky_slope: float,
        recompute_ffn: bool = False,
    ) -> None:
        """``recompute_ffn``: the default for :meth:`forward`'s ``recompute_ffn`` (the model decides per step)."""
        super().__init__()
        self.dropout = dropout
        self.leaky_slope = leaky_slope
        self.recompute_ffn = recompute_ffn
        self.attn_norm = nn.LayerNorm(hidden_size)
        self.attention = DependencyAttention(hidden_size, n_heads, dropatt)
        self.ff_norm = nn.LayerNorm(hidden_size)
        self.ff_in = nn.Linear(hidden_size, ff_size)
        self.ff_out = nn.Linear(ff_size, hidden_size)

    def forward(self, x: torch.Tensor, parent: torch.Tensor, mixture: torch.Tensor,
                recompute_ffn: bool | None = None, rows: torch.Tensor | None = None) -> torch.Tensor:
        """The new (B, T, H) states; with ``rows`` (boolean B × T) only those positions' new states, as a (1, N, H)
        tensor — what a last layer needs where only the masked positions are scored.  The dropout masks at those
        positions are the ones the whole batch would get (layers/dropout.py), so the numbers are the same."""
        # Each residual sum is written over its branch's fresh output, so every stored activation takes the
        # place of a temporary and the heap stays compact (see layers/dropout.py).
        residual = _at_rows(x, rows)
        attended = self.attention(x, self.attn_norm, parent, mixture, rows)
        x = residual_dropout_(attended, residual, self.dropout, self.training, rows)
        return residual_dropout_(self.feed_forward(x, recompute_ffn, rows), x, self.dropout, self.training, rows)

    def feed_forward(self, x: torch.Tensor, recompute_ffn: bool | None = None,
                     rows: torch.Tensor | None = None) -> torch.Tensor:
        """FFN(LN(x)) as a fresh tensor; ``x`` holds the positions ``rows`` selects when it is given (whose inner
        activation is small enough to keep: no recomputation then)."""
        recompute = (self.recompute_ffn if recompute_ffn is None else recompute_ffn) and rows is None
        if recompute and torch.is_grad_enabled() and not plain_ops(x):
            seed = new_seed() if self.training and self.dropout > 0.0 else None
            norm = self.ff_norm
            return _RecomputedFeedForward.apply(x, norm.weight, norm.bias, self.ff_in.weight, self.ff_in.bias,
                                                self.ff_out.weight, self.ff_out.bias, norm.eps, self.leaky_slope,
                                                self.dropout, seed)
        inner = leaky_relu_dropout_(norm_linear(x, self.ff_norm, self.ff_in), self.leaky_slope, self.dropout,
                                    self.training, rows)
        return position_linear(inner, self.ff_out.weight, self.ff_out.bias)


class _RecomputedFeedForward(torch.autograd.Function):
    """FFN(LN(x)) = Linear₂(dropout(leaky_relu(Linear₁(LN(x))))) keeping only x: backward recomputes the inner
    (B, T, 4H) activation, one Linear₁ product more per layer, instead of storing it.

    The dropout's 1/(1−p) scale is applied to Linear₂'s weight (a (H, 4H) matrix) rather than to the
    (tokens, 4H) activation: leaky_relu commutes with positive scaling, so the result is the same and every
    pass over the large tensor that can be saved is saved."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, norm_weight: torch.Tensor, norm_bias: torch.Tensor,
                weight_in: torch.Tensor, bias_in: torch.Tensor, weight_out: torch.Tensor, bias_out: torch.Tensor,
                eps: float, slope: float, p: float, seed: int | None) -> torch.Tensor:
        ctx.eps, ctx.slope, ctx.p, ctx.seed = eps, slope, p, seed
        drop = None if seed is None else drop_mask((*x.shape[:-1], weight_in.size(0)), p, seed)
        ctx.kept = None if drop is None else KeptMask(drop)
        normed, inner, mean, rstd = _RecomputedFeedForward._inner(x, norm_weight, norm_bias, weight_in, bias_in,
                                                                  eps, slope, drop)
        del normed
        ctx.save_for_backward(x, mean, rstd, norm_weight, norm_bias, weight_in, bias_in, weight_out)
        return position_linear(inner, _RecomputedFeedForward._scaled(weight_out, p, seed), bias_out)

    @staticmethod
    def _scaled(weight_out: torch.Tensor, p: float, seed: int | None) -> torch.Tensor:
        return weight_out if seed is None else weight_out * (1.0 / (1.0 - p))

    @staticmethod
    def _inner(x: torch.Tensor, norm_weight: torch.Tensor, norm_bias: torch.Tensor, weight_in: torch.Tensor,
               bias_in: torch.Tensor, eps: float, slope: float,
               drop: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(normalised x, the inner activation with dropped entries zeroed but not rescaled, mean, rstd)."""
        normed, mean, rstd = torch.native_layer_norm(x, [x.size(-1)], norm_weight, norm_bias, eps)
        inner = torch.nn.functional.leaky_relu_(position_linear(normed, weight_in, bias_in), slope)
        if drop is not None:
            inner.masked_fill_(drop, 0.0)
        return normed, inner, mean, rstd

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, mean, rstd, norm_weight, norm_bias, weight_in, bias_in, weight_out = ctx.saved_tensors
        drop = None if ctx.kept is None else ctx.kept.unpack()
        normed, inner = _RecomputedFeedForward._inner(x, norm_weight, norm_bias, weight_in, bias_in, ctx.eps,
                                                      ctx.slope, drop)[:2]
        scaled = _RecomputedFeedForward._scaled(weight_out, ctx.p, ctx.seed)
        grad_inner, grad_weight_out, grad_bias_out = linear_backward(grad.contiguous(), inner, scaled)
        if ctx.seed is not None:
            grad_weight_out.mul_(1.0 / (1.0 - ctx.p))
        # Kept entries of `inner` have their input's sign; dropped ones are zero and get their gradient zeroed.
        grad_inner = torch.ops.aten.leaky_relu_backward(grad_inner, inner, ctx.slope, True)
        del inner
        if drop is not None:
            grad_inner.masked_fill_(drop, 0.0)
        del drop
        grad_normed, grad_weight_in, grad_bias_in = linear_backward(grad_inner, normed, weight_in)
        del grad_inner, normed
        grad_x, grad_norm_weight, grad_norm_bias = torch.ops.aten.native_layer_norm_backward(
            grad_normed.contiguous(), x, [x.size(-1)], mean, rstd, norm_weight, norm_bias, [True, True, True]
        )
        return (grad_x, grad_norm_weight, grad_norm_bias, grad_weight_in, grad_bias_in, grad_weight_out,
                grad_bias_out, None, None, None, None)
