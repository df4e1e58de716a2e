"""The RNGTr encoder: ``<ROOT>`` + words embedded as word + UPOS (+ position), then post-LayerNorm transformer
layers whose self-attention is conditioned on a graph (:mod:`.attention`).

``<ROOT>`` is a learned vector at position 0 rather than a vocabulary word, so the word vocabulary stays the
shared :class:`~depinduce.data.vocab.Vocab`.  The layers follow BERT's layout (post-LN, GELU FFN), as the paper's
BERT-initialised encoder does, so an optional BERT initialisation maps onto the same shapes.
"""

from __future__ import annotations

import torch
from torch import nn

from depinduce.errors import DepinduceError
from depinduce.models.rngtr.attention import GraphAttention
from depinduce.models.rngtr.config import RNGTrConfig


class EncoderLayer(nn.Module):
    """x = LN(x + Drop(GraphAttn(x))); x = LN(x + Drop(FFN(x)))."""

    def __init__(self, config: RNGTrConfig, n_relations: int) -> None:
        super().__init__()
        self.attention = GraphAttention(config.hidden_size, config.n_heads, n_relations, config.dropout)
        self.norm1 = nn.LayerNorm(config.hidden_size)
        self.ffn = nn.Sequential(nn.Linear(config.hidden_size, config.ff_size), nn.GELU(),
                                 nn.Linear(config.ff_size, config.hidden_size))
        self.norm2 = nn.LayerNorm(config.hidden_size)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, relations: torch.Tensor | None) -> torch.Tensor:
        x = self.norm1(x + self.dropout(self.attention(x, mask, relations)))
        return self.norm2(x + self.dropout(self.ffn(x)))


class GraphEncoder(nn.Module):
    """Hidden states (B, T+1, H) of ``<ROOT>`` + words given words, UPOS and an optional graph."""

    def __init__(self, config: RNGTrConfig, n_words: int, n_upos: int, n_labels: int, pad_index: int) -> None:
        super().__init__()
        self.config = config
        self.words = nn.Embedding(n_words, config.hidden_size, padding_idx=pad_index)
        self.upos = nn.Embedding(n_upos, config.hidden_size, padding_idx=0)
        self.root = nn.Parameter(torch.randn(config.hidden_size) * 0.02)
        self.positions = nn.Embedding(config.max_positions, config.hidden_size) if config.positions else None
        self.norm = nn.LayerNorm(config.hidden_size)
        self.dropout = nn.Dropout(config.dropout)
        n_relations = 2 * n_labels + 1
        self.layers = nn.ModuleList(EncoderLayer(config, n_relations) for _ in range(config.n_layers))

    def forward(self, tokens: torch.Tensor, upos: torch.Tensor, mask: torch.Tensor,
                relations: torch.Tensor | None) -> torch.Tensor:
        """``tokens``/``upos``/``mask`` (B, T) over words; ``relations`` (B, T+1, T+1) or None (no graph)."""
        B, T = tokens.shape
        if T + 1 > self.config.max_positions:
            raise DepinduceError(f"rngtr: a sentence of {T} tokens exceeds max_positions "
                                 f"({self.config.max_positions}, ROOT included)")
        words = self.words(tokens) + self.upos(upos)
        x = torch.cat([self.root.expand(B, 1, -1), words], dim=1)
        if self.positions is not None:
            x = x + self.positions.weight[: T + 1]
        x = self.dropout(self.norm(x))
        full_mask = torch.cat([mask.new_ones((B, 1)), mask], dim=1)
        for layer in self.layers:
            x = layer(x, full_mask, relations)
        return x
