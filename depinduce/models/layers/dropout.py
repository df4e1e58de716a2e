"""Inverted dropout that is cheap to draw on CPU, keeps its mask for backward as bits, and can work in place.

Why not ``torch.nn.functional.dropout``: it draws one random number per element (``bernoulli_``, about 20 ns
each on the benchmark CPUs), which made dropout a large share of a training step, and it keeps a boolean mask
per element until backward (about 100 MB over the paper configuration's layers for a 4096-token batch).

Here each 64-bit draw of ``random_()`` is split into four 15-bit fields (roughly 1 ns per element) of a private
generator seeded per mask, and backward gets the mask as bits (:class:`KeptMask`: numpy's packbits, 1 bit per
element, unpacked in about a twentieth of the time a redraw takes; before, backward drew the mask again from its
seed, which was 4–5% of a StructFormer 8 × 512 step).  The drop probability is quantised to
1/32768 (p = 0.1 becomes 3277/32768 = 0.10001).  Seeds come from torch's default generator, so
``torch.manual_seed`` makes runs repeatable as usual.  Masks are applied with ``masked_fill_`` (multiplying by
a boolean tensor would first convert it to a float copy).  On other devices, and while ``torch.compile``
traces a step (``train.compile``), torch's own dropout is used.
Under autocast (``precision: bf16``) the in-place variants work out of place: a residual sum written over a
bfloat16 branch would make the residual stream bfloat16 too, where torch's ``residual + branch`` keeps float32.

The in-place variants (``leaky_relu_dropout_``, ``residual_dropout_``) write their result over a fresh input
tensor that nothing else needs: each stored activation then takes the place of a temporary, which keeps the
allocator's heap from fragmenting as batches of different shapes come and go.

``rows``: a layer computed only at some positions (a language model's last layer at the masked positions)
gets, at those positions, exactly the mask the whole (B, T, C) tensor would have got: ``x`` then holds the
selected rows as a (1, N, C) tensor, ``rows`` is the boolean (B, T) selection, and the mask is drawn for
(B, T, C) and indexed (about 1 ns per element, against the layer's C·C' multiply-adds per row it saves).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from depinduce.models.layers.kernels import on_cpu_route, plain_ops

_FIELD_BITS = 15
_FIELD_SIZE = 1 << _FIELD_BITS


@lru_cache(maxsize=64)
def _constant(value: float, dtype: torch.dtype) -> torch.Tensor:
    """``value`` as a 0-dim CPU tensor of ``dtype``.  Why: on the CPU an elementwise op with a Python number
    first casts the number (wrapped as a float64 or int64 tensor) to the other operand's dtype, four more ops
    per use; with a tensor of that dtype it does not, and computes the same numbers."""
    return torch.tensor(value, dtype=dtype)


def _scale_(x: torch.Tensor, factor: float) -> torch.Tensor:
    """``x.mul_(factor)`` (for float32 and float64 ``x`` on the CPU without the number's cast)."""
    if x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64):
        return x.mul_(_constant(factor, x.dtype))
    return x.mul_(factor)


def new_seed() -> int:
    """A seed for one dropout mask, drawn from torch's default CPU generator."""
    return int(torch.randint(0, 2**62, (1,), dtype=torch.int64))


def drop_mask(shape: torch.Size | tuple[int, ...], p: float, seed: int,
              rows: torch.Tensor | None = None) -> torch.Tensor:
    """A CPU boolean tensor, true (drop) with probability ≈ p independently per element; the same for the same
    ``seed``.  With ``rows`` (boolean, B × T): the rows it selects of the (B, T, C) mask, shaped ``shape``."""
    if rows is not None:
        return drop_mask((*rows.shape, shape[-1]), p, seed)[rows].view(shape)
    count = 1
    for size in shape:
        count *= size
    generator = torch.Generator().manual_seed(seed)
    if len(shape) > 0 and shape[-1] % 4 == 0:
        # the same words in the same order, shaped so that their 16-bit fields come out as ``shape`` (no
        # slicing or reshaping ops)
        words = torch.empty((*shape[:-1], shape[-1] // 4), dtype=torch.int64).random_(generator=generator)
        fields = words.view(torch.int16)
    else:
        words = torch.empty((count + 3) // 4, dtype=torch.int64).random_(generator=generator)
        fields = words.view(torch.int16)[:count].view(shape)
    # random_() leaves the sign bit 0
    return fields.bitwise_and_(_constant(_FIELD_SIZE - 1, torch.int16)).lt(_constant(round(p * _FIELD_SIZE),
                                                                                     torch.int16))


class KeptMask:
    """A boolean mask kept for backward as bits (numpy's packbits): an eighth of a boolean tensor's memory, and
    unpacking it takes about a twentieth of the time drawing it again from its seed would (8.4 M elements,
    2 threads: 0.3 ms against 7 ms)."""

    __slots__ = ("bits", "shape")

    def __init__(self, mask: torch.Tensor) -> None:
        self.shape = tuple(mask.shape)
        self.bits = np.packbits(mask.contiguous().numpy(), axis=None)

    def unpack(self) -> torch.Tensor:
        bools = np.unpackbits(self.bits, count=math.prod(self.shape)).view(np.bool_)
        return torch.from_numpy(bools).view(self.shape)


def apply_mask_(x: torch.Tensor, drop: torch.Tensor, p: float) -> torch.Tensor:
    """Zero ``x`` where ``drop`` is true and scale the rest by 1/(1−p), in place."""
    return _scale_(x.masked_fill_(drop, 0.0), 1.0 / (1.0 - p))


def dropout_(x: torch.Tensor, p: float, seed: int, rows: torch.Tensor | None = None) -> KeptMask:
    """Apply the mask of ``seed`` to ``x`` in place (zero the dropped, scale the kept by 1/(1−p)); returns the
    mask kept for backward."""
    drop = drop_mask(x.shape, p, seed, rows)
    apply_mask_(x, drop, p)
    return KeptMask(drop)


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, p: float, seed: int, rows: torch.Tensor | None) -> torch.Tensor:
        out = x.clone()
        ctx.p, ctx.kept = p, dropout_(out, p, seed, rows)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        return apply_mask_(grad.clone(), ctx.kept.unpack(), ctx.p), None, None, None


def apply_dropout(x: torch.Tensor, p: float, training: bool, rows: torch.Tensor | None = None) -> torch.Tensor:
    """Zero each element with probability ``p`` and scale the rest by 1/(1−p) while training; identity otherwise.
    ``rows``: see the module docstring (CPU only: torch's dropout elsewhere draws its own mask)."""
    if not training or p == 0.0:
        return x
    if torch.compiler.is_compiling():  # train.compile: torch's dropout, which the compiler traces and fuses
        return torch.nn.functional.dropout(x, p, True)
    if not on_cpu_route(x):
        if rows is not None:
            raise ValueError("dropout at selected rows is drawn on CPU only")
        return torch.nn.functional.dropout(x, p, True)
    return _Dropout.apply(x, p, new_seed(), rows)


class _LeakyReluDropout(torch.autograd.Function):
    """u ← dropout(leaky_relu(u)) in place, keeping only the result: where an element was kept its sign is the
    input's, which is all leaky_relu's backward needs, and where it was dropped the gradient is zero anyway.
    The next layer keeps the same tensor, so the pair stores one activation where torch's ops store two."""

    @staticmethod
    def forward(ctx: Any, u: torch.Tensor, slope: float, p: float, seed: int | None,
                rows: torch.Tensor | None) -> torch.Tensor:
        ctx.mark_dirty(u)
        ctx.slope, ctx.p = slope, p
        torch.nn.functional.leaky_relu_(u, slope)
        ctx.kept = None if seed is None else dropout_(u, p, seed, rows)
        ctx.save_for_backward(u)
        return u

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None, None]:
        (out,) = ctx.saved_tensors
        grad_u = torch.ops.aten.leaky_relu_backward(grad, out, ctx.slope, True)
        if ctx.kept is not None:
            apply_mask_(grad_u, ctx.kept.unpack(), ctx.p)
        return grad_u, None, None, None, None


def leaky_relu_dropout_(u: torch.Tensor, slope: float, p: float, training: bool,
                        rows: torch.Tensor | None = None) -> torch.Tensor:
    """``dropout(leaky_relu(u, slope), p)`` computed in place on ``u`` (which nothing else may need), storing a
    single activation for backward.  ``rows``: see the module docstring."""
    if plain_ops(u):
        return apply_dropout(torch.nn.functional.leaky_relu(u, slope), p, training, rows)
    seed = new_seed() if training and p > 0.0 else None
    if not torch.is_grad_enabled():
        out = torch.nn.functional.leaky_relu_(u, slope)
        if seed is not None:
            dropout_(out, p, seed, rows)
        return out
    return _LeakyReluDropout.apply(u, slope, p, seed, rows)


class _ResidualDropout(torch.autograd.Function):
    """branch ← dropout(branch) + residual, in place on ``branch``; keeps nothing but the mask's bits."""

    @staticmethod
    def forward(ctx: Any, branch: torch.Tensor, residual: torch.Tensor, p: float, seed: int | None,
                rows: torch.Tensor | None) -> torch.Tensor:
        ctx.mark_dirty(branch)
        ctx.p = p
        drop = None if seed is None else drop_mask(branch.shape, p, seed, rows)
        ctx.kept = None if drop is None else KeptMask(drop)
        return _add_dropped_(branch, residual, p, drop)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None, None, None]:
        if ctx.kept is None:
            return grad.clone(), grad, None, None, None
        return apply_mask_(grad.clone(), ctx.kept.unpack(), ctx.p), grad, None, None, None


def _add_dropped_(branch: torch.Tensor, residual: torch.Tensor, p: float, drop: torch.Tensor | None) -> torch.Tensor:
    """branch ← residual + dropout(branch) in two passes over the data."""
    if drop is None:
        return branch.add_(residual)
    branch.masked_fill_(drop, 0.0)
    return torch.add(residual, branch, alpha=1.0 / (1.0 - p), out=branch)


def residual_dropout_(branch: torch.Tensor, residual: torch.Tensor, p: float, training: bool,
                      rows: torch.Tensor | None = None) -> torch.Tensor:
    """``residual + dropout(branch, p)`` computed in place on ``branch`` (which nothing else may need).
    ``rows``: see the module docstring."""
    if plain_ops(branch):
        return residual + apply_dropout(branch, p, training, rows)
    seed = new_seed() if training and p > 0.0 else None
    if not torch.is_grad_enabled():
        return _add_dropped_(branch, residual, p, None if seed is None else drop_mask(branch.shape, p, seed, rows))
    return _ResidualDropout.apply(branch, residual, p, seed, rows)
