"""BatchNorm whose statistics cover the positions a mask marks, computed without selecting them.

PRPN normalises over the real positions of a padded batch only (padding must never change a result).  Selecting
those rows first (``x[mask]``) is the plain way, and the CPU's route keeps it; on a GPU a boolean selection makes
the host wait for the device to count the rows, in the forward pass and again in the backward pass.  Here the
statistics are masked sums over every position instead: the same mean and variance, the same running-statistics
update as ``nn.BatchNorm1d`` (biased variance to normalise, unbiased variance into ``running_var``), and an output
at every position (the caller discards the unmarked ones).
"""

from __future__ import annotations

import torch
from torch import nn


def masked_batch_norm(x: torch.Tensor, mask: torch.Tensor, norm: nn.BatchNorm1d) -> torch.Tensor:
    """``norm`` applied to ``x`` (..., C) as if to ``x[mask]`` (N, C), returned at every position of ``x``.

    In training the batch statistics are those of the marked positions and ``norm``'s running statistics are
    updated as ``nn.BatchNorm1d`` updates them (``momentum`` None: the cumulative average); in evaluation the
    running statistics normalise, as there.  One marked position gives a zero variance (torch raises instead; no
    batch of sentences has one position)."""
    use_batch = norm.training or norm.running_mean is None
    if use_batch:
        weight = mask.to(x.dtype).unsqueeze(-1)
        dims = tuple(range(x.dim() - 1))
        count = weight.sum(dims)
        mean = (x * weight).sum(dims) / count
        centred = x - mean
        variance = (centred.square() * weight).sum(dims) / count
        if norm.training and norm.track_running_stats and norm.running_mean is not None:
            _update_running(norm, mean, variance, count)
    else:
        centred = x - norm.running_mean
        variance = norm.running_var
    out = centred * torch.rsqrt(variance + norm.eps)
    if norm.affine:
        out = torch.addcmul(norm.bias, out, norm.weight)
    return out


@torch.no_grad()
def _update_running(norm: nn.BatchNorm1d, mean: torch.Tensor, variance: torch.Tensor, count: torch.Tensor) -> None:
    norm.num_batches_tracked.add_(1)
    momentum = norm.momentum
    if momentum is None:  # cumulative moving average, as torch's BatchNorm
        factor = (1.0 / norm.num_batches_tracked).to(norm.running_mean.dtype)
    else:
        factor = momentum
    unbiased = variance * count / (count - 1).clamp(min=1)
    norm.running_mean.lerp_(mean.to(norm.running_mean.dtype), factor)
    norm.running_var.lerp_(unbiased.to(norm.running_var.dtype), factor)
