"""Graph-conditioned self-attention (RNGTr): the previous dependency graph enters every attention score.

For positions i, j of ``<ROOT>`` + words, the relation id r_ij is 0 (no arc), ``label + 1`` when j is i's head,
and ``label + 1 + L`` when i is j's head (L labels).  Each layer has two tables rK, rV of shape (2L+1, d_head),
shared by all heads: e_ij = q_i·(k_j + rK[r_ij]) / √d_head, o_i = Σ_j α_ij (v_j + rV[r_ij]).  Row 0 of both
tables is fixed at zero, so "no arc" adds nothing and a pass with no graph is a plain transformer (SynTr).  The
relation term is scaled with the rest (the authors' code forgets to scale it).

Two forms of the same numbers.  The CPU's route finds the arcs once per pass (``nonzero``) and computes the
relation terms at the arcs alone.  Off it (a GPU, or :func:`~depinduce.models.layers.kernels.device_route`) a
``nonzero`` makes the host wait for the device, so the relation ids stay a dense (B, N, N) tensor: the key term
is gathered from q·rKᵀ over the 2L+1 relations, the value term is the attention weights summed per relation
(``scatter_add``) times rV — no host read, shapes the data do not decide.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from depinduce.models.layers.kernels import on_cpu_route


def relation_ids(heads: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, n_labels: int) -> torch.Tensor:
    """(B, T+1, T+1) relation ids over ``<ROOT>`` + words for a batch of graphs.

    ``heads`` (B, T) holds each word's head in 0..T (0 = ROOT; a negative head = no arc, e.g. the empty graph),
    ``labels`` (B, T) label ids in 0..L-1, ``mask`` (B, T) real words.  Padding words get no arcs.
    """
    B, T = heads.shape
    valid = mask & (heads >= 0) & (heads <= T)
    if not on_cpu_route(heads):
        return _dense_relation_ids(heads, labels, valid, n_labels)
    out = torch.zeros((B, T + 1, T + 1), dtype=torch.long, device=heads.device)
    b, d = valid.nonzero(as_tuple=True)
    h = heads[b, d]
    lab = labels[b, d]
    # head-of first, dependent-of second: in a 2-cycle of an argmax graph (x heads y and y heads x) each pair then
    # deterministically reads "j is i's head"; within one assignment no position pair occurs twice
    out[b, h, d + 1] = lab + 1 + n_labels  # row = the head, column = its dependent
    out[b, d + 1, h] = lab + 1  # row = dependent i (position d+1), column = its head j
    return out


def _dense_relation_ids(heads: torch.Tensor, labels: torch.Tensor, valid: torch.Tensor,
                        n_labels: int) -> torch.Tensor:
    """:func:`relation_ids` without a host read (the device route): the same ids from one-hot head columns.
    As there, "j is i's head" wins over "i is j's head" where a 2-cycle writes both."""
    B, T = heads.shape
    positions = torch.arange(T + 1, device=heads.device)
    is_head = (heads[:, :, None] == positions) & valid[:, :, None]  # (B, T, T+1): word d's head column
    out = torch.zeros((B, T + 1, T + 1), dtype=torch.long, device=heads.device)
    out[:, :, 1:] = torch.where(is_head, labels[:, :, None] + 1 + n_labels, 0).transpose(1, 2)  # head-of
    out[:, 1:] = torch.where(is_head, labels[:, :, None] + 1, out[:, 1:])  # dependent-of
    return out


class Arcs(NamedTuple):
    """The arcs of a (B, N, N) relation-id tensor: batch, row and column indices and the arcs' ids."""

    b: torch.Tensor
    i: torch.Tensor
    j: torch.Tensor
    rel: torch.Tensor


def graph_arcs(relations: torch.Tensor) -> Arcs:
    """The arcs of ``relations``, found once per graph and shared by every layer (a ``nonzero`` waits for the
    device, so once per pass rather than once per layer)."""
    b, i, j = relations.nonzero(as_tuple=True)
    return Arcs(b, i, j, relations[b, i, j])


class GraphAttention(nn.Module):
    """Multi-head self-attention with relation embeddings added to keys and values (see the module docstring)."""

    def __init__(self, hidden_size: int, n_heads: int, n_relations: int, dropout: float) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.head_size = hidden_size // n_heads
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size)
        self.out = nn.Linear(hidden_size, hidden_size)
        self.rel_k = nn.Embedding(n_relations, self.head_size, padding_idx=0)
        self.rel_v = nn.Embedding(n_relations, self.head_size, padding_idx=0)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, relations: torch.Tensor | Arcs | None) -> torch.Tensor:
        """``x`` (B, N, H), ``mask`` (B, N) real positions, ``relations`` (B, N, N) ids, their :class:`Arcs`, or
        None (no graph).

        A graph has about 2n arcs among n² pairs, so the relation terms are computed at the arcs only (gathered
        dot products scattered into the scores, attention weights gathered at the arcs for the values): the
        same numbers as adding rK[r_ij]/rV[r_ij] at every pair, where "no arc" adds zero, at a fraction of the
        cost — the dense (B, N, N, d_head) relation tensors and their embedding gradients never exist.  Off the
        CPU's route a (B, N, N) tensor takes the dense form of :meth:`_dense_forward` (no host read)."""
        B, N, H = x.shape
        q, k, v = self.qkv(x).view(B, N, 3, self.n_heads, self.head_size).permute(2, 0, 3, 1, 4)
        if isinstance(relations, torch.Tensor) and not on_cpu_route(x):
            return self._dense_forward(q, k, v, mask, relations)
        scores = q @ k.transpose(-1, -2)  # (B, h, N, N)
        arcs = None
        if relations is not None:
            arcs = relations if isinstance(relations, Arcs) else graph_arcs(relations)
            b, i, j, rel = arcs
            at_arcs = (q[b, :, i] * self.rel_k(rel)[:, None, :]).sum(-1)  # (E, h)
            scores = scores.permute(0, 2, 3, 1).index_put((b, i, j), scores.permute(0, 2, 3, 1)[b, i, j] + at_arcs)
            scores = scores.permute(0, 3, 1, 2)
        scores = scores / math.sqrt(self.head_size)
        scores = scores.masked_fill(~mask[:, None, None, :], torch.finfo(scores.dtype).min)
        alpha = self.dropout(F.softmax(scores, dim=-1))
        out = alpha @ v  # (B, h, N, d)
        if arcs is not None:
            b, i, j, rel = arcs
            values = alpha[b, :, i, j][:, :, None] * self.rel_v(rel)[:, None, :]  # (E, h, d)
            out = out.permute(0, 2, 1, 3).index_put((b, i), values, accumulate=True).permute(0, 2, 1, 3)
        return self.out(out.transpose(1, 2).reshape(B, N, H))

    def _dense_forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                       relations: torch.Tensor) -> torch.Tensor:
        """The relation terms over the dense ids (B, N, N), per relation rather than per arc: q·rK[r] for the 2L+1
        relations gathered at r_ij, and Σ_j α_ij rV[r_ij] = Σ_r (Σ_{j: r_ij = r} α_ij) rV[r].  Row 0 ("no arc")
        enters as a constant zero, so it adds nothing and gets no gradient, as ``padding_idx`` gives it."""
        B, h, N, d = q.shape
        rel_k, rel_v = (torch.cat([table.weight.new_zeros((1, d)), table.weight[1:]])
                        for table in (self.rel_k, self.rel_v))
        index = relations[:, None].expand(B, h, N, N)
        scores = q @ k.transpose(-1, -2) + (q @ rel_k.T).gather(-1, index)  # (B, h, N, N)
        scores = scores / math.sqrt(self.head_size)
        scores = scores.masked_fill(~mask[:, None, None, :], torch.finfo(scores.dtype).min)
        alpha = self.dropout(F.softmax(scores, dim=-1))
        per_relation = alpha.new_zeros((B, h, N, rel_v.shape[0])).scatter_add(-1, index, alpha)
        out = alpha @ v + per_relation @ rel_v  # (B, h, N, d)
        return self.out(out.transpose(1, 2).reshape(B, N, h * d))
