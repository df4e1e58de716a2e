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
from depinduce.models.layers.kernels import bmm_into, linear_backward, lowered, norm_linear, position_linear


def _relation(parent: torch.Tensor, mixture: torch.Tensor) -> torch.Tensor:
    """(B, heads, T, T) = w_parent[h]·P + w_dep[h]·Pᵀ."""
    return mixture[:, 0, None, None] * parent[:, None] + mixture[:, 1, None, None] * parent.transpose(1, 2)[:, None]


def _split_heads(qkv: torch.Tensor, n_heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(B, T, 3·H) → q, k, v as (B, heads, T, d) views."""
    batch, width, three_hidden = qkv.shape
    parts = qkv.view(batch, width, 3, n_heads, three_hidden // (3 * n_heads)).permute(2, 0, 3, 1, 4)
    return parts[0], parts[1], parts[2]


def _merge_heads(context: torch.Tensor) -> torch.Tensor:
    """(B, heads, T, d) → (B, T, heads·d)."""
    batch, heads, width, dim = context.shape
    return context.transpose(1, 2).reshape(batch, width, heads * dim)


class _AttentionCore(torch.autograd.Function):
    """out(dropout(sigmoid(q·kᵀ·scale) ⊙ M) · v) from the fused q/k/v projection (B, T, 3·H), keeping only
    that projection and P.

    Heads are processed one at a time with batched matmuls that read q, k and v straight out of the projection
    (strided, no copies); each head's result is copied into its slice of the output (``bmm_into``: a strided
    ``out=`` would send bmm down a loop of one small product per sentence).  Backward recomputes the
    gates, relations and weights (one more q·kᵀ product per layer) instead of storing (B, heads, T, T) tensors.
    With ``rows`` (boolean B × T) the output projection runs at those positions only, giving (1, N, H).
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
        context = qkv.new_empty(heads.shape)
        for h in range(n_heads):
            weights = heads.weights(h)[0]
            bmm_into(context[:, :, h], weights, heads.v(h))
        return position_linear(_at_rows(context.view(heads.shape[0], heads.shape[1], -1), rows), out_weight,
                               out_bias)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        qkv, parent, mixture, out_weight = ctx.saved_tensors
        heads = _Heads(qkv, parent, mixture, ctx.n_heads, ctx.p, None if ctx.kept is None else ctx.kept.unpack())
        batch, width = heads.shape[:2]
        context = qkv.new_empty(heads.shape)
        per_head = []
        for h in range(ctx.n_heads):
            weights, gates, relation = heads.weights(h)
            bmm_into(context[:, :, h], weights, heads.v(h))
            per_head.append((weights, gates, relation))
        rows = ctx.rows
        grad_context, grad_out_weight, grad_out_bias = linear_backward(
            grad.contiguous(), _at_rows(context.view(batch, width, -1), rows), out_weight
        )
        del context
        if rows is not None:  # positions the projection did not read get no gradient
            grad_context = grad_context.new_zeros((batch, width, grad_context.size(-1))).index_put_(
                (rows,), grad_context[0])
        grad_context = grad_context.reshape(heads.shape)
        grad_qkv = qkv.new_empty(qkv.shape).view(batch, width, 3, ctx.n_heads, -1)
        grad_parent = torch.zeros_like(parent)
        grad_mixture = torch.zeros_like(mixture)
        parent_t = parent.transpose(1, 2).contiguous()
        mix = heads.mixture
        for h in range(ctx.n_heads):
            weights, gates, relation = per_head[h]
            per_head[h] = None
            grad_h = grad_context[:, :, h]
            bmm_into(grad_qkv[:, :, 2, h], weights.transpose(1, 2), grad_h)
            del weights
            grad_weights = torch.bmm(grad_h, heads.v(h).transpose(1, 2))
            if heads.drop is not None:
                apply_mask_(grad_weights, heads.drop[h], ctx.p)
            grad_relation = grad_weights * gates
            grad_parent.add_(grad_relation, alpha=mix[h][0]).add_(grad_relation.transpose(1, 2), alpha=mix[h][1])
            grad_mixture[h, 0] = torch.dot(grad_relation.view(-1), parent.reshape(-1))
            grad_mixture[h, 1] = torch.dot(grad_relation.view(-1), parent_t.view(-1))
            del grad_relation
            # d sigmoid = g (1 − g); computed in place on tensors that are no longer needed.
            grad_scores = grad_weights.mul_(relation).mul_(gates).mul_(gates.neg_().add_(1.0)).mul_(heads.scale)
            bmm_into(grad_qkv[:, :, 0, h], grad_scores, heads.k(h))
            bmm_into(grad_qkv[:, :, 1, h], grad_scores.transpose(1, 2), heads.q(h))
        return (grad_qkv.view(qkv.shape), grad_parent, grad_mixture, grad_out_weight, grad_out_bias,
                None, None, None, None)


def _at_rows(x: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
    """``x`` (B, T, C) itself, or its rows that ``rows`` (boolean B × T) selects as a (1, N, C) tensor."""
    return x if rows is None else x[rows].unsqueeze(0)


class _Heads:
    """Per-head views of a fused q/k/v projection and the per-head attention weights (no autograd)."""

    def __init__(self, qkv: torch.Tensor, parent: torch.Tensor, mixture: torch.Tensor, n_heads: int, p: float,
                 drop: torch.Tensor | None) -> None:
        """``drop``: the attention dropout's mask (heads, B, T, T), or None."""
        batch, width, three_hidden = qkv.shape
        dim = three_hidden // (3 * n_heads)
        self.shape = (batch, width, n_heads, dim)
        self.parts = qkv.view(batch, width, 3, n_heads, dim)
        self.scale = dim**-0.5
        self.parent, self.parent_t = parent, parent.transpose(1, 2)
        self.mixture = mixture.tolist()
        self.p = p
        self.drop = drop

    def q(self, h: int) -> torch.Tensor:
        return self.parts[:, :, 0, h]

    def k(self, h: int) -> torch.Tensor:
        return self.parts[:, :, 1, h]

    def v(self, h: int) -> torch.Tensor:
        return self.parts[:, :, 2, h]

    def weights(self, h: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(weights after dropout, sigmoid gates, relation M) of head h, each (B, T, T)."""
        gates = torch.bmm(self.q(h), self.k(h).transpose(1, 2)).mul_(self.scale).sigmoid_()
        relation = torch.mul(self.parent, self.mixture[h][0]).add_(self.parent_t, alpha=self.mixture[h][1])
        weights = gates * relation
        if self.drop is not None:
            apply_mask_(weights, self.drop[h], self.p)
        return weights, gates, relation


def _fused_attention_supported(qkv: torch.Tensor) -> bool:
    """The fused core draws its dropout masks on CPU; elsewhere (and under autocast) plain autograd ops
    do the work."""
    return qkv.device.type == "cpu" and not lowered(qkv)


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
            q, k, v = _split_heads(qkv, self.n_heads)
            weights = torch.sigmoid(torch.matmul(q, k.transpose(-1, -2)) * self.head_dim**-0.5)
            weights = apply_dropout(weights * _relation(parent, mixture), self.dropatt, self.training)
            context = _at_rows(_merge_heads(torch.matmul(weights, v)), rows)
            return position_linear(context, self.out.weight, self.out.bias)
        seed = new_seed() if self.training and self.dropatt > 0.0 else None
        return _AttentionCore.apply(qkv, parent, mixture, self.out.weight, self.out.bias, self.n_heads,
                                    self.dropatt, seed, rows)


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
        if recompute and torch.is_grad_enabled() and x.device.type == "cpu" and not lowered(x):
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
