"""A cumulative product whose backward never reads the host.

torch's backward of ``cumprod`` first asks whether any input is zero (``.item()``: the host waits for the
device) and takes a division-based formula when none is.  PRPN's stick-breaking gates are cumulative products
over a handful of memory slots, computed twice a step; on a GPU those two reads stall a step that is bound by
the host issuing kernels.  Here the backward is the zero-safe formula for every input: with S slots it forms an
(…, S, S) table of partial products, small next to the step's other tensors.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable

from depinduce.models.layers.kernels import plain_ops


def cumprod_last(x: torch.Tensor) -> torch.Tensor:
    """``x.cumprod(-1)``; with the backward below off the CPU's route and while ``torch.compile`` traces
    (:func:`~depinduce.models.layers.kernels.plain_ops`: torch's backward would read the host inside the graph),
    on the CPU's route torch's own (a host read there costs nothing)."""
    if not plain_ops(x) or not torch.is_grad_enabled():
        return x.cumprod(dim=-1)
    return _CumprodLast.apply(x)


class _CumprodLast(torch.autograd.Function):
    """d out_j / d x_k = Π_(i<k) x_i · Π_(k<i≤j) x_i for j ≥ k, so
    grad_k = Π_(i<k) x_i · Σ_(j≥k) grad_j Π_(k<i≤j) x_i, every product formed without dividing by x_k."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x.cumprod(dim=-1)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        slots = x.size(-1)
        index = torch.arange(slots, device=x.device)
        after = index[None, :] > index[:, None]  # [k, i]: factor i comes after slot k
        # partial[..., k, j] = Π_(k<i≤j) x_i (1 for j ≤ k)
        partial = torch.where(after, x.unsqueeze(-2), x.new_ones(())).cumprod(dim=-1)
        upper = index[None, :] >= index[:, None]  # [k, j]: j ≥ k
        summed = (partial * grad.unsqueeze(-2)).masked_fill(~upper, 0.0).sum(dim=-1)
        before = torch.cat([x.new_ones(x.shape[:-1] + (1,)), x[..., :-1].cumprod(dim=-1)], dim=-1)
        return before * summed
