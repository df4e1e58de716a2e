"""The ternary score tensors of the Probabilistic Transformer's CRF and their three parameterisations.

For distance bucket k (see :func:`depinduce.models.probformer.inference.bucket_index`), the ternary factor of
(H^c_i = j, Z_i = a, Z_j = b) scores T[k][a, b, c] (paper equations 2, 9, 13 and 14):

- ``uv``:   T[k][a, b, c] = Σ_r U[k, c, r, a] · V[k, c, r, b]                (a rank-R product per bucket and channel)
- ``uvw``:  T[k][a, b, c] = Σ_r U[k, r, a] · V[k, r, b] · W[k, c, r]          (one Kruskal form per bucket)
- ``none``: T[k][a, b, c] = T[k, c, a, b]                                   (the full tensor)

Mean-field inference never builds T.  Every form is written as a pair of linear maps of the label marginals Q_z
(B, T, d) into per-bucket (B, C, T, R') tensors P_k (the dependent's side, slot a) and S_k (the head's side,
slot b) with F[c, i, j] = Σ_r' P_k[c, i, r'] · S_k[c, j, r'] for the bucket k of (i, j); :meth:`project` computes
them (for ``uv``, R' = rank: one (B·T × d) · (d × 2·K·C·R) product) and :meth:`back_project` applies the
transposed maps, which is how the messages to the labels return to the d label scores.  These two products are
almost all of the model's arithmetic; they run through oneDNN (:mod:`depinduce.models.layers.kernels`).
:meth:`weights` packs the parameters once per forward pass, so autograd keeps one copy of the packed weights, not
one per iteration.

The ROOT variant's tensor T_root[a, e, c] (word label a, root label e, channel c; paper section 2.3.5) takes one
of the same three forms without buckets, chosen on its own (``root_decomposition``: the authors' ``use_root_td``,
whose default is the full tensor whatever the words use), and is small enough (d × d_root × C) to be built whole
every forward pass (:class:`RootFactor`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch
from torch import nn

from depinduce.models.layers.kernels import position_linear


class TernaryFactors(nn.Module, ABC):
    """Base class: K buckets of d × d × C ternary scores in one of the three forms."""

    def __init__(self, d: int, n_channels: int, n_buckets: int, rank: int) -> None:
        super().__init__()
        self.d, self.n_channels, self.n_buckets, self.rank = d, n_channels, n_buckets, rank

    @abstractmethod
    def weights(self) -> tuple[torch.Tensor, ...]:
        """The parameters packed for :meth:`project` / :meth:`back_project` (computed once per forward): the
        projection matrix, its contiguous transpose for the way back, and any further factor."""

    @abstractmethod
    def project(self, q: torch.Tensor, weights: tuple[torch.Tensor, ...]) -> tuple[list[torch.Tensor], ...]:
        """P and S for label marginals ``q`` (B, T, d): one (B, C, T, R') tensor per bucket each (often views of
        one projection, not to be modified in place)."""

    @abstractmethod
    def back_project(self, grad_p: Sequence[torch.Tensor], grad_s: Sequence[torch.Tensor],
                     weights: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """The transposed maps: (B, T, d) from coefficients on P and S (one tensor per bucket, shaped like them)."""

    @abstractmethod
    def tensor(self) -> torch.Tensor:
        """The reconstructed ternary scores (K, d, d, C), ``[k, a, b, c]`` (tests, analysis)."""

    @abstractmethod
    def squared_norm(self) -> torch.Tensor:
        """‖T‖²_F summed over buckets, without building T where the form allows it."""


def _linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x`` (B, T, C_in) times ``weight`` (C_out, C_in)ᵀ through oneDNN on CPU (layers/kernels.py: about 1.5×
    MKL's speed for these shapes), forward and backward."""
    return position_linear(x, weight, x.new_zeros(weight.size(0)))


def _split(y: torch.Tensor, parts: int, channels: int) -> list[torch.Tensor]:
    """(B, T, parts·C·R) → ``parts`` views (B, C, T, R).  ``unbind``, not indexing: its backward stacks the
    parts' gradients into one tensor instead of zero-filling a full-size one per part."""
    batch, width, _ = y.shape
    return [part.transpose(1, 2) for part in y.view(batch, width, parts, channels, -1).unbind(2)]


def _join(parts: Sequence[torch.Tensor]) -> torch.Tensor:
    """The inverse layout of :func:`_split`: (B, C, T, R) tensors → (B, T, parts·C·R), one copy."""
    batch, channels, width, rank = parts[0].shape
    return torch.stack([p.transpose(1, 2) for p in parts], dim=2).view(batch, width, -1)


class UVFactors(TernaryFactors):
    """``uv``: T[k][a, b, c] = Σ_r U[k, c, r, a] V[k, c, r, b]; U and V are (K, C, R, d)."""

    def __init__(self, d: int, n_channels: int, n_buckets: int, rank: int) -> None:
        super().__init__(d, n_channels, n_buckets, rank)
        self.U = nn.Parameter(torch.randn(n_buckets, n_channels, rank, d) / math.sqrt(rank))
        self.V = nn.Parameter(torch.randn(n_buckets, n_channels, rank, d) / math.sqrt(rank))

    def weights(self) -> tuple[torch.Tensor, ...]:
        packed = torch.cat([self.U.reshape(-1, self.d), self.V.reshape(-1, self.d)])
        return packed, packed.t().contiguous()

    def project(self, q, weights):
        parts = _split(_linear(q, weights[0]), 2 * self.n_buckets, self.n_channels)
        return parts[: self.n_buckets], parts[self.n_buckets :]

    def back_project(self, grad_p, grad_s, weights):
        return _linear(_join([*grad_p, *grad_s]), weights[1])

    def tensor(self) -> torch.Tensor:
        return torch.einsum("kcra,kcrb->kabc", self.U, self.V)

    def squared_norm(self) -> torch.Tensor:
        # ‖Uᵀ V‖²_F = Σ (U Uᵀ) ⊙ (V Vᵀ): R × R Gram matrices instead of the d × d product
        return (torch.matmul(self.U, self.U.transpose(-1, -2)) * torch.matmul(self.V, self.V.transpose(-1, -2))).sum()


class UVWFactors(TernaryFactors):
    """``uvw``: T[k][a, b, c] = Σ_r U[k, r, a] V[k, r, b] W[k, c, r]; U, V (K, R, d), W (K, C, R).

    P[k, c, i, r] = (Q_i · U[k, r]) W[k, c, r] and S[k, c, j, r] = Q_j · V[k, r] (the same for every channel)."""

    def __init__(self, d: int, n_channels: int, n_buckets: int, rank: int) -> None:
        super().__init__(d, n_channels, n_buckets, rank)
        self.U = nn.Parameter(torch.randn(n_buckets, rank, d) / math.sqrt(rank))
        self.V = nn.Parameter(torch.randn(n_buckets, rank, d) / math.sqrt(rank))
        self.W = nn.Parameter(torch.randn(n_buckets, n_channels, rank) / math.sqrt(rank))

    def weights(self) -> tuple[torch.Tensor, ...]:
        packed = torch.cat([self.U.reshape(-1, self.d), self.V.reshape(-1, self.d)])
        return packed, packed.t().contiguous(), self.W

    def project(self, q, weights):
        parts = _split(_linear(q, weights[0]), 2 * self.n_buckets, 1)  # (B, 1, T, R) each
        channel_weights = weights[2][:, None, :, None, :]  # (K, 1, C, 1, R)
        p = [a * w for a, w in zip(parts[: self.n_buckets], channel_weights)]
        s = [v.expand_as(x) for v, x in zip(parts[self.n_buckets :], p)]
        return p, s

    def back_project(self, grad_p, grad_s, weights):
        channel_weights = weights[2][:, None, :, None, :]
        folded_p = [(g * w).sum(1, keepdim=True) for g, w in zip(grad_p, channel_weights)]
        folded_s = [g.sum(1, keepdim=True) for g in grad_s]
        return _linear(_join([*folded_p, *folded_s]), weights[1])

    def tensor(self) -> torch.Tensor:
        return torch.einsum("kra,krb,kcr->kabc", self.U, self.V, self.W)

    def squared_norm(self) -> torch.Tensor:
        gram_u = torch.matmul(self.U, self.U.transpose(-1, -2))
        gram_v = torch.matmul(self.V, self.V.transpose(-1, -2))
        gram_w = torch.matmul(self.W.transpose(-1, -2), self.W)
        return (gram_u * gram_v * gram_w).sum()


class FullFactors(TernaryFactors):
    """``none``: the full tensor, stored (K, C, d, d) as ``[k, c, a, b]``; P = Q·T, S = Q (R' = d)."""

    def __init__(self, d: int, n_channels: int, n_buckets: int, rank: int) -> None:
        super().__init__(d, n_channels, n_buckets, rank)
        self.T = nn.Parameter(torch.randn(n_buckets, n_channels, d, d))

    def weights(self) -> tuple[torch.Tensor, ...]:
        # rows (k, c, b), columns a: P[k, c, i, b] = Σ_a Q[i, a] T[k, c, a, b]
        packed = self.T.transpose(2, 3).reshape(-1, self.d)
        return packed, packed.t().contiguous()

    def project(self, q, weights):
        p = _split(_linear(q, weights[0]), self.n_buckets, self.n_channels)
        s = q[:, None].expand_as(p[0])
        return p, [s] * self.n_buckets

    def back_project(self, grad_p, grad_s, weights):
        return _linear(_join(grad_p), weights[1]) + torch.stack(list(grad_s)).sum(dim=(0, 2))

    def tensor(self) -> torch.Tensor:
        return self.T.permute(0, 2, 3, 1)

    def squared_norm(self) -> torch.Tensor:
        return self.T.pow(2).sum()


FACTORS: dict[str, type[TernaryFactors]] = {"uv": UVFactors, "uvw": UVWFactors, "none": FullFactors}


class RootFactor(nn.Module):
    """T_root[a, e, c] for (H^c_i = ROOT, Z_i = a, Z_ROOT = e) in its own form: ``uv`` (a rank-``rank`` product
    per channel), ``uvw`` (one Kruskal form) or ``none`` (the full tensor, initialised N(0, 1) as the authors')."""

    def __init__(self, decomposition: str, d: int, root_size: int, n_channels: int, rank: int) -> None:
        super().__init__()
        self.decomposition = decomposition
        scale = 1.0 / math.sqrt(rank)
        if decomposition == "uv":
            self.U = nn.Parameter(torch.randn(n_channels, rank, d) * scale)
            self.V = nn.Parameter(torch.randn(n_channels, rank, root_size) * scale)
        elif decomposition == "uvw":
            self.U = nn.Parameter(torch.randn(rank, d) * scale)
            self.V = nn.Parameter(torch.randn(rank, root_size) * scale)
            self.W = nn.Parameter(torch.randn(n_channels, rank) * scale)
        else:
            self.T = nn.Parameter(torch.randn(d, root_size, n_channels))

    def tensor(self) -> torch.Tensor:
        """(d, d_root, C), ``[a, e, c]``."""
        if self.decomposition == "uv":
            return torch.einsum("cra,cre->aec", self.U, self.V)
        if self.decomposition == "uvw":
            return torch.einsum("ra,re,cr->aec", self.U, self.V, self.W)
        return self.T
