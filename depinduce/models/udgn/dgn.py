"""The Dependency Graph Network layer: competitive gated heads over the soft dependency graph (section 3.3).

For hidden states h (B, T, H), ``n_heads`` = N heads of width d and the undirected mask m (B, T, T)::

    [q, k, v, g]_ik = W h_i + b                            one projection, H → 4·N·d (3·N·d without gates)
    s_ijk  = (q_ik · k_jk + b^dir(i,j)_k) / √d              b^left_k when j < i, b^right_k when j > i, 0 at i = j
    â_ijk  = softmax_k(s_ijk)                              the competitive controller: heads compete per pair
    a_ijk  = â_ijk · m_ij                                  the graph gates how much flows between i and j
    o_ik   = sigmoid(g_ik) ⊙ Σ_j a_ijk · tanh(v_jk)
    h'_i   = h_i + dropout(W_o dropout([o_i1; …; o_iN]) + b_o)     no feed-forward block, no LayerNorm inside

The outer dropout is the authors' second one (their layer drops the attention module's output before the
residual sum, and that module drops its messages before the projection); ``dropout_twice=False`` (config
``dgn_dropout: once``) keeps only the inner one.

Options (the paper's ablations): ``gates=False`` drops g (the gate is 1), ``competition="sigmoid"`` replaces the
softmax over heads by an independent sigmoid per head, ``relative_bias=False`` drops b^dir, and
``activation="identity"`` passes v without tanh.  ``dropatt`` drops entries a_ijk (head k for the pair (i, j)).

Initialisation (``init``): ``authors`` draws one Xavier-uniform matrix for the whole [q, k, v, g] projection and
the left/right biases uniformly in ±0.1, as their code does; ``depinduce`` draws Xavier per q, k, v, g block (a
larger bound: fan-out N·d instead of 4·N·d) and starts the biases at zero.  Both: Xavier W_o, zero b and b_o.

The authors' code forms a_ijk in log space, exp(log_softmax_k(s) + log(m + 1e−6)); here it is the product of
equation 11 itself, which gives padding keys exactly zero weight (so a sentence's states do not depend on its
batch-mates' padding).  The model passes m + 1e−6 at real keys with ``graph_floor: 1.0e-6`` (the authors'
function to round-off), m itself by default.

Every head is computed at once: scores, controller and messages are (B, N, T, T) / (B, N, T, d) batched matrix
products, and the two projections run through oneDNN on CPU (:mod:`depinduce.models.layers.kernels`).

Memory (CPU training): autograd would keep, per layer, contiguous copies of q, k and the values for the batched
products, tanh(v), sigmoid(g), the messages before and after the gate and dropout — about twice the projection
itself.  :class:`_GatedHeadsCore` keeps exactly the tensors its backward needs, or, when ``recompute`` is set,
only the projection and m, recomputing the rest in backward (two batched products and a few element-wise
passes: about 6% of a small model's step); dropout masks are kept as bits for it.  The model decides per
step (config ``recompute_heads``, ``auto``: only when memory would otherwise run short).  Under bfloat16 autocast
(``precision: bf16``) the core runs too, on the bfloat16 projection, making the casts autocast would make for the
plain ops (its output is theirs exactly): torch's plain ops would keep bfloat16 copies of q, k, tanh(v), the
weights and the gated messages, more than the activations' halving saves.  On other devices, and without
gradients, the same computation runs as plain torch ops.  The second dropout follows either path
(``residual_dropout_``: in place, keeping only its mask's seed), so recomputation does not touch it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from depinduce.models.layers.dropout import (
    KeptMask,
    apply_dropout,
    apply_mask_,
    drop_mask,
    new_seed,
    residual_dropout_,
)
from depinduce.models.layers.kernels import autocast_off, linear_backward, lowered, on_cpu_route, position_linear

# Pair directions: 0 = the word itself, 1 = j left of i (j < i), 2 = j right of i (j > i).
SAME, LEFT, RIGHT = 0, 1, 2


@lru_cache(maxsize=32)
def pair_directions(width: int, device: torch.device | None = None) -> torch.Tensor:
    """(T, T) long tensor: the direction of key j seen from query i (SAME / LEFT / RIGHT); cached per width and
    device (read only), so that a step does not build it again; an ordinary tensor even when first asked for
    under ``torch.inference_mode`` (parsing), which training could not save for backward."""
    with torch.inference_mode(False):
        index = torch.arange(width, device=device)
        i, j = index[:, None], index[None, :]
        return torch.where(j < i, LEFT, torch.where(j > i, RIGHT, SAME))


@dataclass(frozen=True)
class HeadOptions:
    """The shape and ablation switches of a layer's heads."""

    n_heads: int
    head_size: int
    gates: bool = True
    competition: str = "softmax"  # softmax | sigmoid
    activation: str = "tanh"  # tanh | identity

    @property
    def n_parts(self) -> int:
        return 4 if self.gates else 3


def _split(parts: torch.Tensor, opts: HeadOptions) -> tuple[torch.Tensor, ...]:
    """The projection (B, T, parts·N·d) → q, k, v[, g], each a (B, T, N, d) view.  ``unbind`` rather than
    indexing: its backward writes the gradients into one tensor instead of zero-filling one per part."""
    batch, width, _ = parts.shape
    return parts.view(batch, width, opts.n_parts, opts.n_heads, opts.head_size).unbind(2)


def _controller_of_heads(q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor | None, opts: HeadOptions,
                         batch: int) -> torch.Tensor:
    """â (B, N, T, T) from head-major (B·N, T, d) queries and keys and every head's (N, T, T) direction bias of
    each pair (or None).  The keys enter the product as the transpose of a contiguous head-major tensor, which
    the batched product reads as it is (a transposed operand): copying them to a contiguous (B, N, d, T) instead
    moves every element on its own, 1.2–2 ms per layer at 4 × 256 and 8 × 512 against 0.05–0.2 ms for the
    head-major copy (Zen 4, 2 threads), for the same products."""
    scores = torch.bmm(q, k.transpose(1, 2)).view(batch, -1, q.size(1), q.size(1))
    if bias is not None:
        scores = scores + bias
    scores = scores.mul_(opts.head_size**-0.5)
    return scores.softmax(dim=1) if opts.competition == "softmax" else scores.sigmoid()


@lru_cache(maxsize=32)
def pair_sides(width: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """(2, T·T): row 0 is 1 where key j is left of query i, row 1 where it is right (0 elsewhere), so that the
    heads' direction biases b (N, 2) of every pair are one product, b · sides (exactly b^left, b^right or 0).
    Cached per width: built once, not per step."""
    directions = pair_directions(width, device).flatten()
    with torch.inference_mode(False):  # see pair_directions
        return torch.stack((directions == LEFT, directions == RIGHT)).to(dtype)


def _values(v: torch.Tensor, opts: HeadOptions, out: torch.Tensor | None = None) -> torch.Tensor:
    """tanh(v) (or v itself, ``activation: identity``); written into ``out`` when given."""
    if out is None:
        return torch.tanh(v) if opts.activation == "tanh" else v
    return torch.tanh(v, out=out) if opts.activation == "tanh" else out.copy_(v)


def plain_heads(parts: torch.Tensor, graph: torch.Tensor, direction_bias: torch.Tensor | None,
                opts: HeadOptions, dropatt: float, dropout: float, training: bool,
                controllers: list[torch.Tensor] | None = None) -> torch.Tensor:
    """dropout([o_i1; …; o_iN]) (B, T, N·d) with torch's own autograd (other devices, autocast, ``torch.compile``,
    the controllers for analysis): the projection copied head-major once, every product one batched matmul
    over sentences × heads, the (N, 2) direction biases spread over the pairs by one product
    (:func:`pair_sides`) — a few ops per layer where ``matmul`` over (B, N, ·, ·) views and indexing took
    dozens."""
    batch, width, _ = parts.shape
    q, k, v, *gate = _head_major(parts, opts, opts.n_parts)
    bias = None
    if direction_bias is not None:
        with autocast_off(parts):  # the biases themselves, not rounded to bfloat16 (precision: bf16)
            bias = torch.mm(direction_bias, pair_sides(width, parts.device, direction_bias.dtype))
        bias = bias.view(-1, width, width)
    controller = _controller_of_heads(q, k, bias, opts, batch)
    if controllers is not None:
        controllers.append(controller.detach())
    weights = apply_dropout(controller * graph[:, None], dropatt, training).view(-1, width, width)
    messages = torch.bmm(weights, _values(v, opts))  # (B·N, T, d)
    if opts.gates:
        messages = messages * torch.sigmoid(gate[0])
    messages = messages.view(batch, opts.n_heads, width, -1).transpose(1, 2).reshape(batch, width, -1)
    return apply_dropout(messages, dropout, training)


class _Recomputed:
    """The intermediate tensors of one layer's heads, computed without autograd (forward and again in
    backward); dropout masks come from their seeds in forward and are kept as bits (``kept``) for backward, so
    both passes see the same ones.

    In the projection's dtype, except the controller, which is float32 whatever the projection is: a bfloat16
    projection (``precision: bf16``) gets the casts autocast gives the plain ops — q·k in bfloat16, the score
    (with its float32 bias), softmax and graph weighting in float32, the weights cast back to bfloat16 for the
    message product.

    q, k and v are copied once, together, into a head-major (3, B·N, T, d) block, so that every product is one
    ``bmm`` over B·N matrices (what ``matmul`` does with the (B, N, ·, ·) tensors, without its reshapes) and
    the values are computed contiguous.  ``q`` and ``k`` are views of that block (the scores' operands);
    ``forget_queries`` drops them where the heads are kept for backward (a backward that needs them copies them
    again from the projection, which it keeps anyway)."""

    def __init__(self, parts: torch.Tensor, graph: torch.Tensor, table: torch.Tensor | None,
                 directions: torch.Tensor, opts: HeadOptions, dropatt: float, att_seed: int | None,
                 dropout: float, seed: int | None,
                 kept: tuple[KeptMask | None, KeptMask | None] | None = None) -> None:
        """``kept``: the forward pass's (attention, message) dropout masks, in place of drawing them."""
        batch, width, _ = parts.shape
        self.shape = (batch, opts.n_heads, width, opts.head_size)
        self.q, self.k, v = _head_major(parts, opts)
        bias = None if table is None else table[:, directions]
        self.controller = _as(_controller_of_heads(self.q, self.k, bias, opts, batch),
                              _controller_dtype(parts))
        weights = self.controller * graph[:, None]  # (B, N, T, T)
        if kept is not None:
            self.att_drop = None if kept[0] is None else kept[0].unpack()
        else:
            self.att_drop = None if att_seed is None else drop_mask(weights.shape, dropatt, att_seed)
        if self.att_drop is not None:
            apply_mask_(weights, self.att_drop, dropatt)
        self.weights = _as(weights, parts.dtype).view(-1, width, width)  # (B·N, T, T)
        del weights
        self.values = _values(v, opts, out=torch.empty_like(v))  # (B·N, T, d)
        # (B, T, N, d) view of the (B, N, T, d) product
        self.context = torch.bmm(self.weights, self.values).view(self.shape).transpose(1, 2)
        self.gate = torch.sigmoid(_split(parts, opts)[3]) if opts.gates else None
        # A fresh (B, T, N·d) tensor either way (the product written there, or the copy that reshaping the
        # transposed context makes), so dropout may work in place; the context itself is only needed again for
        # the gate's gradient.
        if self.gate is not None:
            messages = torch.mul(self.context, self.gate, out=torch.empty_like(self.gate)).view(batch, width, -1)
        else:
            messages = self.context.reshape(batch, width, -1)
        if kept is not None:
            self.drop = None if kept[1] is None else kept[1].unpack()
        else:
            self.drop = None if seed is None else drop_mask(messages.shape, dropout, seed)
        if self.drop is not None:
            apply_mask_(messages, self.drop, dropout)
        self.messages = messages

    def forget_queries(self) -> None:
        self.q = self.k = None

    def kept_masks(self) -> tuple[KeptMask | None, KeptMask | None]:
        """The dropout masks as bits, for a backward pass that recomputes the heads."""
        return tuple(None if mask is None else KeptMask(mask) for mask in (self.att_drop, self.drop))


def _head_major(parts: torch.Tensor, opts: HeadOptions, count: int = 3) -> tuple[torch.Tensor, ...]:
    """The first ``count`` parts of the projection (B, T, parts·N·d) — q, k and v, or all of them — as contiguous
    (B·N, T, d) tensors, in one copy (all parts: no slice, whose backward would zero-fill a block)."""
    batch, width, _ = parts.shape
    block = parts.view(batch, width, opts.n_parts, opts.n_heads, opts.head_size)
    if count < opts.n_parts:
        block = block[:, :, :count]
    return block.permute(2, 0, 3, 1, 4).reshape(count, batch * opts.n_heads, width, opts.head_size).unbind(0)


def _as(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x.to(dtype)`` without dispatching an op when ``x`` already has that dtype."""
    return x if x.dtype == dtype else x.to(dtype)


class _GatedHeadsCore(torch.autograd.Function):
    """W_o · dropout([o_i1; …; o_iN]) + b_o from the projection, keeping only the projection and m for
    backward (everything else is recomputed there; see the module docstring)."""

    @staticmethod
    def forward(ctx: Any, parts: torch.Tensor, graph: torch.Tensor, table: torch.Tensor | None,
                out_weight: torch.Tensor, out_bias: torch.Tensor, directions: torch.Tensor, opts: HeadOptions,
                dropatt: float, att_seed: int | None, dropout: float, seed: int | None,
                recompute: bool = True) -> torch.Tensor:
        ctx.settings = (opts, dropatt, att_seed, dropout, seed)
        ctx.has_table = table is not None
        saved_table = table if table is not None else graph.new_empty(0)
        ctx.save_for_backward(parts, graph, saved_table, out_weight, directions)
        with autocast_off(parts):  # it casts explicitly, the same way in forward and backward
            heads = _Recomputed(parts, graph, table, directions, opts, dropatt, att_seed, dropout, seed)
            if not recompute:  # intermediates (not inputs or outputs): kept as an attribute
                heads.forget_queries()
            ctx.heads = None if recompute else heads
            ctx.kept = heads.kept_masks() if recompute else None
            return position_linear(heads.messages, _as(out_weight, parts.dtype), _as(out_bias, parts.dtype))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        with autocast_off(grad):
            return _GatedHeadsCore._backward(ctx, grad)

    @staticmethod
    def _backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """The gradients, in each input's dtype but for the weights' (autograd casts those back): the
        controller's in float32, the rest in the projection's dtype, as autocast's plain ops would have them.
        The head-major gradients of q, k and v are written into one (3, B·N, T, d) block and moved into the
        projection's layout by one copy."""
        parts, graph, table, out_weight, directions = ctx.saved_tensors
        out_weight = _as(out_weight, parts.dtype)
        opts, dropatt, att_seed, dropout, seed = ctx.settings
        table = table if ctx.has_table else None
        heads = ctx.heads
        ctx.heads = None
        if heads is None:
            heads = _Recomputed(parts, graph, table, directions, opts, dropatt, att_seed, dropout, seed, ctx.kept)
        batch, n_heads, width, dim = heads.shape
        grad_messages, grad_out_weight, grad_out_bias = linear_backward(_as(grad, parts.dtype).contiguous(),
                                                                        heads.messages, out_weight)
        del heads.messages
        if heads.drop is not None:
            apply_mask_(grad_messages, heads.drop, dropout)
        grad_messages = grad_messages.view(heads.context.shape)  # (B, T, N, d)
        grad_parts = torch.empty_like(parts).view(batch, width, opts.n_parts, n_heads, dim)
        grad_heads = parts.new_empty((3, batch * n_heads, width, dim))  # q, k, v head-major
        grad_context = torch.empty_like(heads.values)  # (B·N, T, d), contiguous: read by two batched products
        if heads.gate is not None:
            # d sigmoid = s (1 − s), written straight into its block of the projection's gradient
            grad_gate = torch.mul(grad_messages, heads.context, out=grad_parts[:, :, 3])
            grad_gate.mul_(heads.gate).mul_(1.0 - heads.gate)
            torch.mul(grad_messages.transpose(1, 2), heads.gate.transpose(1, 2),
                      out=grad_context.view(batch, n_heads, width, dim))
        else:
            grad_context.view(batch, n_heads, width, dim).copy_(grad_messages.transpose(1, 2))
        del grad_messages
        grad_weights = _as(torch.bmm(grad_context, heads.values.transpose(1, 2)), _controller_dtype(parts))
        grad_values = torch.bmm(heads.weights.transpose(1, 2), grad_context, out=grad_heads[2])
        del grad_context
        if opts.activation == "tanh":
            grad_values.mul_(1.0 - heads.values * heads.values)
        del heads.values, heads.weights
        grad_weights = grad_weights.view(batch, n_heads, width, width)
        if heads.att_drop is not None:
            apply_mask_(grad_weights, heads.att_drop, dropatt)
        controller = heads.controller
        grad_graph = (grad_weights * controller).sum(dim=1)
        grad_controller = grad_weights.mul_(graph[:, None])
        if opts.competition == "softmax":
            inner = (grad_controller * controller).sum(dim=1, keepdim=True)
            grad_scores = grad_controller.sub_(inner).mul_(controller)
        else:
            grad_scores = grad_controller.mul_(controller).mul_(1.0 - controller)
        grad_scores.mul_(opts.head_size**-0.5)
        grad_table = None
        if table is not None:
            per_pair = grad_scores.sum(dim=0).flatten(1)  # (N, T·T)
            grad_table = torch.zeros_like(table).index_add_(1, directions.flatten(), per_pair)
        grad_scores = _as(grad_scores, parts.dtype).view(-1, width, width)
        q_heads, k_heads = (heads.q, heads.k) if heads.q is not None else _head_major(parts, opts)[:2]
        torch.bmm(grad_scores, k_heads, out=grad_heads[0])
        torch.bmm(grad_scores.transpose(1, 2), q_heads, out=grad_heads[1])
        grad_parts[:, :, :3] = grad_heads.view(3, batch, n_heads, width, dim).permute(1, 3, 0, 2, 4)
        return (grad_parts.view(parts.shape), _as(grad_graph, graph.dtype), grad_table, grad_out_weight,
                grad_out_bias, None, None, None, None, None, None, None)


def _fused_supported(parts: torch.Tensor) -> bool:
    """The fused core draws its dropout masks on CPU; elsewhere plain autograd ops do the work.  Under
    autocast (``precision: bf16``) it runs too, on the bfloat16 projection autocast gave it, with the casts
    autocast would have made (:class:`_Recomputed`).  Not while ``torch.compile`` traces (``train.compile``): the
    plain ops are what the compiler can trace and fuse."""
    return (on_cpu_route(parts) and torch.is_grad_enabled() and not torch.compiler.is_compiling()
            and parts.dtype in (torch.float32, torch.float64, torch.bfloat16))


def _controller_dtype(parts: torch.Tensor) -> torch.dtype:
    """float32 for a bfloat16 projection (autocast's softmax dtype), else the projection's own (float32 or
    float64: ``promote_types`` with float32, decided without dispatching an op)."""
    return parts.dtype if parts.dtype in (torch.float32, torch.float64) else torch.float32


class DGNLayer(nn.Module):
    """One layer of competitive gated heads with a residual connection."""

    def __init__(self, hidden_size: int, n_heads: int, head_size: int, dropout: float, dropatt: float, *,
                 gates: bool = True, competition: str = "softmax", relative_bias: bool = True,
                 activation: str = "tanh", dropout_twice: bool = True, init: str = "authors") -> None:
        super().__init__()
        self.opts = HeadOptions(n_heads, head_size, gates, competition, activation)
        self.dropout = dropout
        self.dropatt = dropatt
        self.dropout_twice = dropout_twice
        n_parts = self.opts.n_parts
        width = n_heads * head_size
        # Output layout (parts, heads, head_size): q, k, v and g are contiguous blocks.
        self.project = nn.Linear(hidden_size, n_parts * width)
        self.out = nn.Linear(width, hidden_size)
        # Per head: the score bias for a key on the left and on the right of the query.
        self.direction_bias = nn.Parameter(torch.zeros(n_heads, 2)) if relative_bias else None
        if init == "authors":
            nn.init.xavier_uniform_(self.project.weight)
            if self.direction_bias is not None:
                nn.init.uniform_(self.direction_bias, -0.1, 0.1)
        else:
            for weight in self.project.weight.data.chunk(n_parts, dim=0):  # Xavier per projection
                nn.init.xavier_uniform_(weight)
        nn.init.xavier_uniform_(self.out.weight)
        nn.init.zeros_(self.project.bias)
        nn.init.zeros_(self.out.bias)

    def forward(self, x: torch.Tensor, graph: torch.Tensor, directions: torch.Tensor,
                controllers: list[torch.Tensor] | None = None, recompute: bool = True) -> torch.Tensor:
        """``x`` (B, T, H), ``graph`` = m (B, T, T), ``directions`` (T, T) from :func:`pair_directions`; returns
        the new (B, T, H) states.  When ``controllers`` is a list, â (B, N, T, T) of this layer is appended.
        ``recompute``: keep only the projection for backward (CPU training; see the module docstring)."""
        parts = position_linear(x, self.project.weight, self.project.bias)
        graph = _as(graph, parts.dtype)
        # (N, 3): SAME gets no bias
        if controllers is None and _fused_supported(parts):
            table = None if self.direction_bias is None else F.pad(self.direction_bias, (1, 0))
            att_seed = new_seed() if self.training and self.dropatt > 0.0 else None
            seed = new_seed() if self.training and self.dropout > 0.0 else None
            out = _GatedHeadsCore.apply(parts, graph, table, self.out.weight, self.out.bias, directions, self.opts,
                                        self.dropatt, att_seed, self.dropout, seed, recompute)
        else:
            messages = plain_heads(parts, graph, self.direction_bias, self.opts, self.dropatt, self.dropout,
                                   self.training, controllers)
            out = position_linear(messages, self.out.weight, self.out.bias)
        if self.dropout_twice:  # the authors' second dropout, on the projected output (keeps only its seed)
            return residual_dropout_(out, x, self.dropout, self.training)
        return x + out if lowered(out) else out.add_(x)  # a bfloat16 branch: keep the residual float32
