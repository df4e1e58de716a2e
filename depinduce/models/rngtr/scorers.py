"""Biaffine arc and label scorers (Dozat & Manning), as RNGTr's decoder: MLPs with LeakyReLU 0.1 and dropout
0.33, arc MLP 500 and label MLP 100 by default."""

from __future__ import annotations

import torch
from torch import nn


def mlp(in_size: int, out_size: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(nn.Linear(in_size, out_size), nn.LeakyReLU(0.1), nn.Dropout(dropout))


class ArcScorer(nn.Module):
    """Arc scores (B, T, T+1): row = word dependent, column = head among ``<ROOT>`` + words.

    s_ij = d_iᵀ W h_j + bᵀ h_j.  Padding heads and the diagonal (a word heading itself) get a very low score, so
    softmax over a row gives the word's head distribution.
    """

    def __init__(self, hidden_size: int, mlp_size: int, dropout: float) -> None:
        super().__init__()
        self.dep = mlp(hidden_size, mlp_size, dropout)
        self.head = mlp(hidden_size, mlp_size, dropout)
        self.weight = nn.Parameter(torch.zeros(mlp_size, mlp_size))
        self.bias = nn.Parameter(torch.zeros(mlp_size))

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``hidden`` (B, T+1, H) with ROOT at 0, ``mask`` (B, T) real words."""
        dep = self.dep(hidden[:, 1:])
        head = self.head(hidden)
        scores = (dep @ self.weight) @ head.transpose(1, 2) + (head @ self.bias)[:, None, :]
        T = mask.shape[1]
        allowed = torch.cat([mask.new_ones((mask.shape[0], 1)), mask], dim=1)[:, None, :].expand(-1, T, -1).clone()
        diag = torch.arange(T, device=mask.device)
        allowed[:, diag, diag + 1] = False
        return scores.masked_fill(~allowed, torch.finfo(scores.dtype).min / 2)


class LabelScorer(nn.Module):
    """Label scores of word i under head j: d_iᵀ U_l h_j + W_l [d_i; h_j] + b_l for each label l."""

    def __init__(self, hidden_size: int, mlp_size: int, n_labels: int, dropout: float) -> None:
        super().__init__()
        self.dep = mlp(hidden_size, mlp_size, dropout)
        self.head = mlp(hidden_size, mlp_size, dropout)
        self.bilinear = nn.Parameter(torch.zeros(n_labels, mlp_size, mlp_size))
        self.linear = nn.Linear(2 * mlp_size, n_labels)

    def _dep_bilinear(self, dep: torch.Tensor) -> torch.Tensor:
        """dᵀ U_l for every label: (B, T, L, mlp) by one matrix product (a three-operand einsum may contract in
        a far costlier order)."""
        L, m, n = self.bilinear.shape
        return (dep @ self.bilinear.permute(1, 0, 2).reshape(m, L * n)).view(*dep.shape[:-1], L, n)

    def at_heads(self, hidden: torch.Tensor, heads: torch.Tensor) -> torch.Tensor:
        """(B, T, L) label scores of each word under the head ``heads`` (B, T) gives it (0..T; clamped)."""
        dep = self.dep(hidden[:, 1:])
        head_all = self.head(hidden)
        index = heads.clamp(0, hidden.shape[1] - 1)[..., None].expand(-1, -1, head_all.shape[-1])
        head = head_all.gather(1, index)
        bilinear = (self._dep_bilinear(dep) * head[:, :, None, :]).sum(-1)
        return bilinear + self.linear(torch.cat([dep, head], dim=-1))

    def all_pairs(self, hidden: torch.Tensor) -> torch.Tensor:
        """(B, T, T+1, L) label scores for every (word, head) pair — for decoders that choose heads later."""
        dep = self.dep(hidden[:, 1:])
        head = self.head(hidden)
        bilinear = torch.einsum("btln,bsn->btsl", self._dep_bilinear(dep), head)
        m = dep.shape[-1]
        w_dep, w_head = self.linear.weight[:, :m], self.linear.weight[:, m:]
        return bilinear + (dep @ w_dep.T)[:, :, None, :] + (head @ w_head.T)[:, None, :, :] + self.linear.bias
