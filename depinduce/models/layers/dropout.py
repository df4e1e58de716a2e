"""Inverted dropout that is cheap to draw on CPU, keeps no mask between forward and backward, and can work in
place.

Why not ``torch.nn.functional.dropout``: it draws one random number per element (``bernoulli_``, about 20 ns
each on the benchmark CPUs), which made dropout a large share of a training step, and it keeps a boolean mask
per element until backward (about 100 MB over the paper configuration's layers for a 4096-token batch).

Here each 64-bit draw of ``random_()`` is split into four 15-bit fields (roughly 1 ns per element), and only the
seed of a private generator is kept: backward draws the same mask again.  The drop probability is quantised to
1/32768 (p = 0.1 becomes 3277/32768 = 0.10001).  Seeds come from torch's default generator, so
``torch.manual_seed`` makes runs repeatable as usual.  Masks are applied with ``masked_fill_`` (multiplying by
a boolean tensor would first convert it to a float copy).  On other devices torch's own dropout is used.
Under autocast (``precision: bf16``) the in-place variants work out of place: a residual sum written over a
bfloat16 branch would make the residual stream bfloat16 too, where torch's ``residual + branch`` keeps float32.

The in-place variants (``leaky_relu_dropout_``, ``residual_dropout_``) write their result over a fresh input
tensor that nothing else needs: each stored activation then takes the place of a temporary, which keeps the
allocator's heap from fragmenting as batches of different shapes come and go.
"""

from __future__ import annotations

from typing import Any

import torch

from depinduce.models.layers.kernels import lowered

_FIELD_BITS = 15
_FIELD_SIZE = 1 << _FIELD_BITS


def new_seed() -> int:
    """A seed for one dropout mask, drawn from torch's default CPU generator."""
    return int(torch.randint(0, 2**62, (1,), dtype=torch.int64))


def drop_mask(shape: torch.Size | tuple[int, ...], p: float, seed: int) -> torch.Tensor:
    """A CPU boolean tensor, true (drop) with probability ≈ p independently per element; the same for the same
    ``seed``."""
    count = 1
    for size in shape:
        count *= size
    generator = torch.Generator().manual_seed(seed)
    words = torch.empty((count + 3) // 4, dtype=torch.int64).random_(generator=generator)
    fields = words.view(torch.int16)[:count].bitwise_and_(_FIELD_SIZE - 1)  # random_() leaves the sign bit 0
    return fields.lt(round(p * _FIELD_SIZE)).view(shape)


def dropout_(x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """Apply the mask of ``seed`` to ``x`` in place (zero the dropped, scale the kept by 1/(1−p))."""
    return x.masked_fill_(drop_mask(x.shape, p, seed), 0.0).mul_(1.0 / (1.0 - p))


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
        ctx.p, ctx.seed = p, seed
        return dropout_(x.clone(), p, seed)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        return dropout_(grad.clone(), ctx.p, ctx.seed), None, None


def apply_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Zero each element with probability ``p`` and scale the rest by 1/(1−p) while training; identity otherwise."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu":
        return torch.nn.functional.dropout(x, p, True)
    return _Dropout.apply(x, p, new_seed())


class _LeakyReluDropout(torch.autograd.Function):
    """u ← dropout(leaky_relu(u)) in place, keeping only the result: where an element was kept its sign is the
    input's, which is all leaky_relu's backward needs, and where it was dropped the gradient is zero anyway.
    The next layer keeps the same tensor, so the pair stores one activation where torch's ops store two."""

    @staticmethod
    def forward(ctx: Any, u: torch.Tensor, slope: float, p: float, seed: int | None) -> torch.Tensor:
        ctx.mark_dirty(u)
        ctx.slope, ctx.p, ctx.seed = slope, p, seed
        torch.nn.functional.leaky_relu_(u, slope)
        if seed is not None:
            dropout_(u, p, seed)
        ctx.save_for_backward(u)
        return u

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        (out,) = ctx.saved_tensors
        grad_u = torch.ops.aten.leaky_relu_backward(grad, out, ctx.slope, True)
        if ctx.seed is not None:
            dropout_(grad_u, ctx.p, ctx.seed)
        return grad_u, None, None, None


def leaky_relu_dropout_(u: torch.Tensor, slope: float, p: float, training: bool) -> torch.Tensor:
    """``dropout(leaky_relu(u, slope), p)`` computed in place on ``u`` (which nothing else may need), storing a
    single activation for backward."""
    if u.device.type != "cpu" or lowered(u):
        return apply_dropout(torch.nn.functional.leaky_relu(u, slope), p, training)
    seed = new_seed() if training and p > 0.0 else None
    if not torch.is_grad_enabled():
        out = torch.nn.functional.leaky_relu_(u, slope)
        return out if seed is None else dropout_(out, p, seed)
    return _LeakyReluDropout.apply(u, slope, p, seed)


class _ResidualDropout(torch.autograd.Function):
    """branch ← dropout(branch) + residual, in place on ``branch``; keeps nothing but the mask's seed."""

    @staticmethod
    def forward(ctx: Any, branch: torch.Tensor, residual: torch.Tensor, p: float, seed: int | None) -> torch.Tensor:
        ctx.mark_dirty(branch)
        ctx.p, ctx.seed = p, seed
        return _add_dropped_(branch, residual, p, seed)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None, None]:
        if ctx.seed is None:
            return grad.clone(), grad, None, None
        grad_branch = grad.masked_fill(drop_mask(grad.shape, ctx.p, ctx.seed), 0.0).mul_(1.0 / (1.0 - ctx.p))
        return grad_branch, grad, None, None


def _add_dropped_(branch: torch.Tensor, residual: torch.Tensor, p: float, seed: int | None) -> torch.Tensor:
    """branch ← residual + dropout(branch) in two passes over the data."""
    if seed is None:
        return branch.add_(residual)
    branch.masked_fill_(drop_mask(branch.shape, p, seed), 0.0)
    return torch.add(residual, branch, alpha=1.0 / (1.0 - p), out=branch)


def residual_dropout_(branch: torch.Tensor, residual: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """``residual + dropout(branch, p)`` computed in place on ``branch`` (which nothing else may need)."""
    if branch.device.type != "cpu" or lowered(branch):
        return residual + apply_dropout(branch, p, training)
    seed = new_seed() if training and p > 0.0 else None
    if not torch.is_grad_enabled():
        return _add_dropped_(branch, residual, p, seed)
    return _ResidualDropout.apply(branch, residual, p, seed)
