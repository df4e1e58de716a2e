"""The output layer and its cross-entropy in one pass: ``linear_cross_entropy(x, weight, bias, targets)``.

Why: a language model's output layer makes the largest tensors of a training step, the (predicted positions ×
vocabulary) logits, and plain autograd keeps several of them at the worst moment: ``cross_entropy`` saves its
log-softmax for backward, and backward then starts, with every activation of the network still alive, by
making two more of the same size (the gradient of the log-softmax and that of the logits) and, under bfloat16
autocast, two float32 copies besides.  On UDGN 4 × 256 with 2,048-token batches that is 50–75 MB on top of the
step's peak.

Because the summed loss is the scalar being differentiated, the gradients of x, the weight and the bias are
known once the forward pass has the softmax: the function computes them there, from the same products in the
same precision as autograd would (softmax − one-hot, written over the logits, then the same matrix products),
keeps those three tensors (the weight's gradient is the weight's size) and only scales them by the incoming
gradient in backward.  The numbers are autograd's to round-off: the log-softmax is the same kernel row by row,
the scale (1 / tokens) is applied after the products instead of before them.

Under bfloat16 autocast it makes autocast's casts itself: the product in bfloat16 (x, weight and bias cast),
the log-softmax in float32, the gradients of the logits rounded to bfloat16 for the backward products, whose
bfloat16 results are widened to float32 as the casts' backward would.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from depinduce.models.layers.kernels import (autocast_off, fold_rows, linear_backward, lowered, on_cpu_route,
                                             position_linear, rows_linear)

# Rows of logits turned into gradients at a time: bounds the float32 scratch under bfloat16 (rows × vocabulary).
_CHUNK_ROWS = 64
IGNORE = -100  # cross_entropy's ignore_index: a target the loss leaves out (padding, a word not scored)


def widened(scores: torch.Tensor) -> torch.Tensor:
    """Scores as a loss reads them: half-precision scores are widened to float32, float32 and float64 scores
    stay as they are (a float64 model's loss is computed in float64, not rounded to float32)."""
    return scores if scores.dtype in (torch.float32, torch.float64) else scores.float()


def _logits_to_gradient(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Overwrite ``logits`` (N, V) with d(summed NLL)/d(logits) = softmax − one-hot, row-chunk by row-chunk in
    float32 on the CPU (the scratch stays small), all rows at once elsewhere (a GPU is bound by the ops the
    host issues; the same numbers, row by row); return the summed NLL (float32 or wider)."""
    total = logits.new_zeros((), dtype=torch.promote_types(logits.dtype, torch.float32))
    rows = torch.arange(logits.size(0), device=logits.device)
    step = _CHUNK_ROWS if on_cpu_route(logits) else max(1, logits.size(0))
    for start in range(0, logits.size(0), step):
        chunk = slice(start, start + step)
        log_p = torch.log_softmax(logits[chunk].to(total.dtype), dim=-1)
        picked = log_p[rows[chunk] - start, targets[chunk]]
        total -= picked.sum()
        log_p.exp_()
        log_p[rows[chunk] - start, targets[chunk]] -= 1
        logits[chunk] = log_p
    return total


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, targets: torch.Tensor,
                half: torch.dtype | None) -> torch.Tensor:
        rows = x.size(0)
        folded = None if half is not None else fold_rows(x)
        if half is not None:  # autocast's casts, made here
            x_used, w_used = x.to(half), weight.to(half)
            grad = F.linear(x_used, w_used, bias.to(half))
            nll = _logits_to_gradient(grad, targets)
            grad_x, grad_w, grad_b = (grad @ w_used), (grad.t() @ x_used), grad.sum(0)
        elif folded is not None:  # rows_linear's folded oneDNN product (the same logits), and its backward
            buffer = position_linear(folded, weight, bias)
            flat = buffer.view(-1, buffer.size(-1))  # the same memory: zeroing its padding rows zeroes them in buffer
            nll = _logits_to_gradient(flat[:rows], targets)
            flat[rows:] = 0  # padding rows take no gradient
            grad_folded, grad_w, grad_b = linear_backward(buffer, folded, weight)
            grad_x = grad_folded.flatten(0, 1)[:rows]
        else:
            grad = F.linear(x, weight, bias)
            nll = _logits_to_gradient(grad, targets)
            grad_x, grad_w, grad_b = grad @ weight, grad.t() @ x, grad.sum(0)
        # Kept in the products' dtype (bfloat16 under autocast: half the bytes, at the step's peak) and widened
        # in backward, which gives the same numbers as widening them here.
        ctx.dtypes = (x.dtype, weight.dtype, bias.dtype)
        ctx.save_for_backward(grad_x, grad_w, grad_b)
        return nll

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        scaled = [_scaled(kept, dtype, grad) for kept, dtype in zip(ctx.saved_tensors, ctx.dtypes)]
        return (*scaled, None, None)


def _scaled(kept: torch.Tensor, dtype: torch.dtype, grad: torch.Tensor) -> torch.Tensor:
    """``kept`` widened to ``dtype`` and scaled by the incoming gradient, in place on the widened copy (one
    tensor of the weight's size at the start of backward, not two); a kept tensor already in ``dtype`` is not
    modified (a graph kept for a second backward still holds it)."""
    widened = kept.to(dtype)
    return widened.mul_(grad) if widened is not kept else kept * grad


def linear_cross_entropy(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                         targets: torch.Tensor) -> torch.Tensor:
    """``F.cross_entropy(F.linear(x, weight, bias), targets, reduction="sum")`` for ``x`` (N, C), computed in
    float32 or wider (half-precision logits widened first), with its gradients made in forward (module
    docstring).  Without gradients, or with nothing to predict, it is the plain computation."""
    wants_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (x, weight, bias))
    if not wants_grad or x.size(0) == 0:
        return F.cross_entropy(widened(rows_linear(x, weight, bias)), targets, reduction="sum")
    half = torch.get_autocast_dtype(x.device.type) if lowered(x) else None
    with autocast_off(x):
        return _LinearCrossEntropy.apply(x, weight, bias, targets, half)
