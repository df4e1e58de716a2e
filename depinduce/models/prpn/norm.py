"""The reading network's layer norm: torch's, or the one the authors' LSTM cell uses.

The authors normalise with γ·(x − μ)/(σ + ε) + β, σ the *unbiased* standard deviation and ε = 1e-6 added outside
the root; ``nn.LayerNorm`` computes γ·(x − μ)/√(σ_b² + ε) + β with the biased variance and ε = 1e-5 inside.  For
inputs whose spread is well above ε the two differ by the constant factor √((n − 1)/n) on γ — the same family of
functions, another starting point — and they part only for nearly constant inputs.  torch's is the default because
it is one fused kernel: the authors' form costs several elementwise passes, run twice per step of the sequential
loop of every reading layer (about 15% of a training step of the paper's network on one CPU thread).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

LayerNormKind = Literal["torch", "authors"]


class AuthorsLayerNorm(nn.Module):
    """γ·(x − μ)/(σ + 1e-6) + β over the last dimension, σ the unbiased standard deviation (the authors' form).

    The parameters are named as ``nn.LayerNorm``'s, so a checkpoint loads under either kind."""

    def __init__(self, size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size))
        self.bias = nn.Parameter(torch.zeros(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        std, mean = torch.std_mean(x, dim=-1, keepdim=True)
        return torch.addcmul(self.bias, (x - mean) / (std + self.eps), self.weight)


def layer_norm(size: int, kind: LayerNormKind) -> nn.Module:
    """A layer norm over ``size`` features of the given kind."""
    return AuthorsLayerNorm(size) if kind == "authors" else nn.LayerNorm(size)
