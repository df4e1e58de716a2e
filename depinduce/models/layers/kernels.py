"""Position-wise linear maps and 1-D convolutions over (B, T, C) sequences, routed to oneDNN on CPU.

Why: on the AMD CPUs depinduce is benchmarked on, torch's float32 ``F.linear`` goes to MKL's sgemm, which does
not use AVX-512 there and reaches about half the speed of oneDNN's convolution kernels on the same data.  A
linear map applied at every position *is* a 1×1 convolution, and a (B, T, C) tensor viewed as (B, C, 1, T) is
already in channels-last layout, so ``conv2d`` computes the same numbers with oneDNN, forward and backward,
without copying the input or the output.  Elsewhere (GPU, other dtypes, tiny inputs) the plain torch ops are used.

Under autocast (training with ``precision: bf16``) every function here is the plain torch op, so that autocast
casts its operands: the Functions below run their own backward, which autocast would not see.  So it is while
``torch.compile`` traces a training step (``train.compile``): the compiler fuses plain ops itself, and the
Functions, their in-place storage tricks and the CPU capability probes would break its graph (:func:`plain_ops`).

The linear maps are autograd Functions whose outputs are ordinary tensors, not views of the 4-D convolution
output, so that the layers may update them in place (e.g. residual sums written over a layer's output): a view
created inside a custom Function may not be modified in place.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import torch
import torch.nn.functional as F

from depinduce.errors import UsageError

LINEAR_KERNEL_VARIABLE = "DEPINDUCE_LINEAR_KERNEL"

# Set by device_route(): the CPU runs the ops a CUDA device would run.  A module global, not a ContextVar:
# torch.compile traces a global's read (and guards on it), not ContextVar.get.
_device_route = False


@contextmanager
def device_route() -> Iterator[None]:
    """Within it, tensors on the CPU take the route tensors on a CUDA device take: torch's own dropout, LSTM and
    products instead of the CPU kernels and custom Functions.  Why: ``scripts/count_ops.py`` counts on a CPU
    the ops a GPU training step dispatches (a GPU step is bound by the host issuing them), and the tests check
    that route on a CPU.  Same function, other random numbers (torch's dropout masks).  Not for threads that
    run models concurrently with other code (a process-wide switch)."""
    global _device_route
    before, _device_route = _device_route, True
    try:
        yield
    finally:
        _device_route = before


def on_cpu_route(x: torch.Tensor) -> bool:
    """Whether ``x`` takes the CPU's route: it is on the CPU and no :func:`device_route` is in force."""
    return x.device.type == "cpu" and not _device_route


def lowered(x: torch.Tensor) -> bool:
    """Whether autocast lowers the precision of products on ``x``'s device (training with ``precision: bf16``):
    the fused kernels and custom autograd Functions of the layers then step aside for torch's own ops, whose
    operands autocast casts and whose backward it knows."""
    return torch.is_autocast_enabled(x.device.type)


def plain_ops(x: torch.Tensor) -> bool:
    """Whether the layers' fused CPU kernels and custom autograd Functions step aside for torch's own ops: off the
    CPU's route (:func:`on_cpu_route`: a CUDA device, whose kernels are torch's), under autocast
    (:func:`lowered`), and while ``torch.compile`` traces (``train.compile``), which fuses plain ops itself and
    cannot trace the Functions' storage tricks, host reads and capability probes without breaking its graph."""
    return lowered(x) or torch.compiler.is_compiling() or not on_cpu_route(x)


def autocast_off(x: torch.Tensor) -> torch.autocast:
    """A region without autocast on ``x``'s device, for code that chooses its own dtypes under ``precision:
    bf16`` (a float32 computation, or casts made explicitly, the same in forward and backward)."""
    return torch.autocast(x.device.type, enabled=False)


@lru_cache(maxsize=1)
def onednn_linear_pays() -> bool:
    """Whether the linear maps go to oneDNN's convolution kernels rather than MKL's sgemm: on CPUs whose kernels
    may use AVX-512 (torch's CPU capability, which ``ATEN_CPU_CAPABILITY`` can lower).  Forward and backward of
    the two networks' shapes, 2 threads: on Zen 5 oneDNN runs 351–411 GFLOP/s against MKL's 180–208, on Zen 4
    141–190 against 150–174 (``scripts/bench_linear.py``); limited to AVX2
    (``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2``) it runs 157–173 against MKL's 166–183, so there the
    plain ``F.linear`` is used (StructFormer 4 × 256 steps 3% faster there).  ``DEPINDUCE_LINEAR_KERNEL=onednn``
    or ``mkl`` overrides the choice, to measure both on a CPU kind not measured yet.  The same numbers to float
    rounding either way."""
    forced = os.environ.get(LINEAR_KERNEL_VARIABLE, "").strip().lower()
    if forced:
        if forced not in ("onednn", "mkl"):
            raise UsageError(f"{LINEAR_KERNEL_VARIABLE}={forced!r}: expected onednn or mkl "
                             "(or unset: chosen by the CPU)")
        return forced == "onednn"
    return torch.backends.cpu.get_cpu_capability() == "AVX512"


def _use_onednn(x: torch.Tensor) -> bool:
    return (
        not plain_ops(x)
        and onednn_linear_pays()
        and x.dtype == torch.float32
        and x.dim() == 3
        and x.numel() > 0
        and torch.backends.mkldnn.is_available()
        and torch.backends.mkldnn.enabled
    )


def _as_channels_last(x: torch.Tensor) -> torch.Tensor:
    """(B, T, C) → a (B, C, 1, T) view with channels-last strides (no copy when ``x`` is contiguous)."""
    return x.contiguous().transpose(1, 2).unsqueeze(2)


def _plain(view: torch.Tensor) -> torch.Tensor:
    """The same memory as ``view`` but a tensor of its own rather than an autograd view, which may then be
    modified in place after being returned from a custom Function; only for results computed without autograd."""
    return torch.empty(0, dtype=view.dtype, device=view.device).set_(
        view.untyped_storage(), view.storage_offset(), view.size(), view.stride()
    )


def _from_channels_last(y: torch.Tensor) -> torch.Tensor:
    """(B, O, 1, T) → (B, T, O) sharing ``y``'s memory (computed without autograd; the sizes and strides are
    set directly, which dispatches two ops where squeezing and transposing the view first took four)."""
    batch, channels, _, width = y.shape
    return torch.empty(0, dtype=y.dtype, device=y.device).set_(
        y.untyped_storage(), y.storage_offset(), (batch, width, channels), (y.stride(0), y.stride(3), y.stride(1))
    )


def _as_channels_last_view(x: torch.Tensor) -> torch.Tensor:
    """:func:`_as_channels_last` as one op, for code without autograd (an ``as_strided`` view of a contiguous
    ``x``; under autograd its backward would be the slow generic one)."""
    x = x.contiguous()
    batch, width, channels = x.shape
    return x.as_strided((batch, channels, 1, width), (width * channels, 1, width * channels, channels))


def _as_kernel(weight: torch.Tensor) -> torch.Tensor:
    """A linear map's (C_out, C_in) weight as the (C_out, C_in, 1, 1) kernel of a 1×1 convolution (one view)."""
    return weight.view(*weight.shape, 1, 1)


def _linear_forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    with torch.no_grad():
        if not _use_onednn(x):
            return _plain(F.linear(x, weight, bias))
        return _from_channels_last(F.conv2d(_as_channels_last_view(x), _as_kernel(weight), bias))


def linear_backward(
    grad: torch.Tensor, x: torch.Tensor, weight: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of ``position_linear(x, weight, bias)`` with respect to x, weight and bias."""
    if _use_onednn(x):
        grad_x, grad_w, grad_b = torch.ops.aten.convolution_backward(
            _as_channels_last_view(grad), _as_channels_last_view(x), _as_kernel(weight), [weight.size(0)],
            [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True],
        )
        return _from_channels_last(grad_x), grad_w.view_as(weight), grad_b
    flat_grad = grad.reshape(-1, grad.size(-1))
    return grad @ weight, flat_grad.t() @ x.reshape(-1, x.size(-1)), flat_grad.sum(0)


class _PositionLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        return _linear_forward(x, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x, weight = ctx.saved_tensors
        return linear_backward(grad.contiguous(), x, weight)


def position_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` for ``x`` (B, T, C_in) and ``weight`` (C_out, C_in); the result is a fresh
    tensor that callers may modify in place."""
    if plain_ops(x):
        return F.linear(x, weight, bias)
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or bias.requires_grad):
        return _PositionLinear.apply(x, weight, bias)
    return _linear_forward(x, weight, bias)


def sequence_conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, padding: int) -> torch.Tensor:
    """``Conv1d`` over the T axis of ``x`` (B, T, C_in) with ``weight`` (C_out, C_in, k), zero ``padding`` on both
    ends; returns a (B, T + 2·padding − k + 1, C_out) view (not to be modified in place).

    Off the CPU's route (a CUDA device) the convolution is one matrix product over the unfolded windows
    (k·C_in columns), the same sums in another order.  Why: with TF32 off (``precision: fp32``, the authors'
    numerics) cuDNN picks FFT algorithms for StructFormer's width-9 convolutions, whose workspace took a
    StructFormer step's GPU memory from about 2 to 37 GB and its speed to 0.4× the authors'
    (docs/results/2026-11-27-gpu-check-h200.md)."""
    if not on_cpu_route(x):
        return _unfolded_conv(x, weight, bias, padding)
    if not _use_onednn(x):
        return F.conv1d(x.transpose(1, 2), weight, bias, padding=padding).transpose(1, 2)
    out = F.conv2d(_as_channels_last(x), weight.unsqueeze(2), bias, padding=(0, padding))
    return out.squeeze(2).transpose(1, 2)


def _unfolded_conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, padding: int) -> torch.Tensor:
    """``sequence_conv`` as one product: each output position's k input positions side by side (im2col)."""
    out_channels, in_channels, width = weight.shape
    windows = F.pad(x, (0, 0, padding, padding)).unfold(1, width, 1)  # (B, T', C_in, k), a view
    return F.linear(windows.reshape(*windows.shape[:2], in_channels * width), weight.reshape(out_channels, -1),
                    bias)


class _NormLinear(torch.autograd.Function):
    """LayerNorm followed by a position-wise linear map, keeping only the LayerNorm's input for backward.

    The normalised activations are recomputed in backward (one cheap pass) instead of being stored: one
    (B, T, C) tensor less per use, which is twice per transformer layer."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, norm_weight: torch.Tensor, norm_bias: torch.Tensor,
                weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
        normed, mean, rstd = torch.native_layer_norm(x, [x.size(-1)], norm_weight, norm_bias, eps)
        ctx.eps = eps
        ctx.save_for_backward(x, mean, rstd, norm_weight, norm_bias, weight)
        return _linear_forward(normed, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, mean, rstd, norm_weight, norm_bias, weight = ctx.saved_tensors
        normed = torch.native_layer_norm(x, [x.size(-1)], norm_weight, norm_bias, ctx.eps)[0]
        grad_normed, grad_w, grad_b = linear_backward(grad.contiguous(), normed, weight)
        del normed
        grad_x, grad_norm_w, grad_norm_b = torch.ops.aten.native_layer_norm_backward(
            grad_normed.contiguous(), x, [x.size(-1)], mean, rstd, norm_weight, norm_bias, [True, True, True]
        )
        return grad_x, grad_norm_w, grad_norm_b, grad_w, grad_b, None


def norm_linear(x: torch.Tensor, norm: torch.nn.LayerNorm, linear: torch.nn.Linear) -> torch.Tensor:
    """``linear(norm(x))`` for ``x`` (B, T, C); with gradients on, stores one activation instead of two.  The
    result is a fresh tensor that callers may modify in place."""
    if not torch.is_grad_enabled() or plain_ops(x):
        return position_linear(norm(x), linear.weight, linear.bias)
    return _NormLinear.apply(x, norm.weight, norm.bias, linear.weight, linear.bias, norm.eps)


def bmm_into(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """``out[...] = a @ b`` for batched matrices, where ``out`` may be a strided slice (one head's columns).

    Why not ``torch.bmm(a, b, out=out)``: on CPU a non-contiguous ``out`` sends bmm down a serial loop of one
    small matrix product per batch item (torch's code path on every CPU), 5–15× slower for sentence-sized
    matrices than the batched kernel followed by one strided copy on an AVX-512 EPYC; the numbers are the
    same."""
    if out.is_contiguous():
        torch.bmm(a, b, out=out)
    else:
        out.copy_(torch.bmm(a, b))


def fold_rows(x: torch.Tensor) -> torch.Tensor | None:
    """A flat (N, C) batch of rows as the (16, ⌈N/16⌉, C) batch of sequences (padded with zero rows) that oneDNN
    takes for a linear map; None where the linear maps do not go to oneDNN or N < 16."""
    rows = x.size(0)
    if not (_use_onednn(x.unsqueeze(0)) and rows >= 16):
        return None
    per_sequence = -(-rows // 16)
    return F.pad(x, (0, 0, 0, 16 * per_sequence - rows)).view(16, per_sequence, x.size(1))


def rows_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``F.linear`` for a flat (N, C_in) batch of rows (the output layer at the masked positions), through
    :func:`fold_rows` so that oneDNN takes them as a batch."""
    folded = fold_rows(x)
    if folded is None:
        return F.linear(x, weight, bias)
    return position_linear(folded, weight, bias).flatten(0, 1)[: x.size(0)]
