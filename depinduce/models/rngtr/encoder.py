"""The RNGTr encoder: ``<ROOT>`` + words embedded as word + UPOS (+ position), then post-LayerNorm transformer
layers whose self-attention is conditioned on a graph (:mod:`.attention`).

``<ROOT>`` is a learned vector at position 0 rather than a vocabulary word, so the word vocabulary stays the
shared :class:`~depinduce.data.vocab.Vocab`.  The layers follow BERT's layout (post-LN, GELU FFN), as the paper's
BERT-initialised encoder does, so an optional BERT initialisation maps onto the same shapes.
"""

from __future__ import annotations

import torch
from torch import nn

from depinduce.errors import ModelError
from depinduce.models.layers.kernels import on_cpu_route
from depinduce.models.rngtr.attention import Arcs, GraphAttention, graph_arcs
from depinduce.models.rngtr.config import RNGTrConfig


class EncoderLayer(nn.Module):
    """x = LN(x + Drop(GraphAttn(x))); x = LN(x + Drop(FFN(x)))."""

    def __init__(self, config: RNGTrConfig, n_relations: int) -> None:
        super().__init__()
        self.attention = GraphAttention(config.hidden_size, config.n_heads, n_relations, config.dropout)
        self.norm1 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.ffn = nn.Sequential(nn.Linear(config.hidden_size, config.ff_size), nn.GELU(),
                                 nn.Linear(config.ff_size, config.hidden_size))
        self.norm2 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, relations: torch.Tensor | Arcs | None) -> torch.Tensor:
        x = self.norm1(x + self.dropout(self.attention(x, mask, relations)))
        return self.norm2(x + self.dropout(self.ffn(x)))


class GraphEncoder(nn.Module):
    """Hidden states (B, T+1, H) of ``<ROOT>`` + words given words, UPOS and an optional graph.

    With ``n_pieces`` (a BERT-initialised encoder, see :mod:`.bert`) the layers run over word pieces: ``[CLS]``
    is ``<ROOT>``, each word's UPOS is added to all its pieces, the graph connects first pieces, and the states
    of ``[CLS]`` and of each word's first piece are returned.
    """

    def __init__(self, config: RNGTrConfig, n_words: int, n_upos: int, n_labels: int, pad_index: int,
                 *, n_pieces: int | None = None) -> None:
        super().__init__()
        self.config = config
        self.piece_mode = n_pieces is not None
        self.words = nn.Embedding(n_pieces if n_pieces is not None else n_words, config.hidden_size,
                                  padding_idx=None if self.piece_mode else pad_index)
        self.upos = nn.Embedding(n_upos, config.hidden_size, padding_idx=0)
        if self.piece_mode:
            self.token_type = nn.Parameter(torch.zeros(config.hidden_size))
        else:
            self.root = nn.Parameter(torch.randn(config.hidden_size) * 0.02)
        self.positions = (nn.Embedding(config.max_positions, config.hidden_size)
                          if config.positions or self.piece_mode else None)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        n_relations = 2 * n_labels + 1
        self.layers = nn.ModuleList(EncoderLayer(config, n_relations) for _ in range(config.n_layers))

    def forward(self, tokens: torch.Tensor, upos: torch.Tensor, mask: torch.Tensor,
                relations: torch.Tensor | None, pieces: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        """``tokens``/``upos``/``mask`` (B, T) over words; ``relations`` (B, T+1, T+1) or None (no graph);
        ``pieces``: the word pieces of :meth:`.bert.PieceTokenizer.encode` (piece mode only)."""
        if self.piece_mode:
            if pieces is None:
                raise ModelError("rngtr: a BERT-initialised encoder needs the word pieces of its input")
            return self._pieces_forward(upos, mask, relations, pieces)
        B, T = tokens.shape
        if T + 1 > self.config.max_positions:
            raise ModelError(f"rngtr: a sentence of {T} tokens exceeds max_positions "
                             f"({self.config.max_positions}, ROOT included)")
        words = self.words(tokens) + self.upos(upos)
        x = torch.cat([self.root.expand(B, 1, -1), words], dim=1)
        if self.positions is not None:
            x = x + self.positions.weight[: T + 1]
        x = self.dropout(self.norm(x))
        full_mask = torch.cat([mask.new_ones((B, 1)), mask], dim=1)
        arcs = _layer_relations(relations)
        for layer in self.layers:
            x = layer(x, full_mask, arcs)
        return x

    def _pieces_forward(self, upos: torch.Tensor, mask: torch.Tensor, relations: torch.Tensor | None,
                        pieces: dict[str, torch.Tensor]) -> torch.Tensor:
        ids, piece_mask, owner, first = (pieces["piece_ids"], pieces["piece_mask"], pieces["piece_word"],
                                         pieces["piece_first"])
        B, P = ids.shape
        if P > self.config.max_positions:
            raise ModelError(f"rngtr: a sentence of {P} word pieces exceeds the encoder's "
                             f"{self.config.max_positions} positions")
        piece_upos = upos.gather(1, owner.clamp(min=0)).masked_fill(owner < 0, 0)  # UPOS 0 = padding: no vector
        x = self.words(ids) + self.upos(piece_upos) + self.positions.weight[:P] + self.token_type
        x = self.dropout(self.norm(x))
        # word position w (0 = ROOT) -> its piece: [CLS] for ROOT, the first piece for a word
        where = torch.cat([first.new_zeros((B, 1)), first], dim=1)
        piece_relations = None
        if relations is not None and on_cpu_route(relations):
            piece_relations = torch.zeros((B, P, P), dtype=relations.dtype, device=relations.device)
            b, i, j = relations.nonzero(as_tuple=True)
            piece_relations[b, where[b, i], where[b, j]] = relations[b, i, j]
        elif relations is not None:
            piece_relations = dense_piece_relations(relations, where, mask, P)
        arcs = _layer_relations(piece_relations)
        for layer in self.layers:
            x = layer(x, piece_mask, arcs)
        return x.gather(1, where[..., None].expand(-1, -1, x.shape[-1]))


def _layer_relations(relations: torch.Tensor | None) -> torch.Tensor | Arcs | None:
    """What every layer reads of a pass's graph: on the CPU's route its arcs, found once for all layers (a
    ``nonzero``); off it the dense ids themselves (a ``nonzero`` would make the host wait for the device)."""
    if relations is None or not on_cpu_route(relations):
        return relations
    return graph_arcs(relations)


def dense_piece_relations(relations: torch.Tensor, where: torch.Tensor, mask: torch.Tensor,
                          pieces: int) -> torch.Tensor:
    """The word relations (B, T+1, T+1) moved onto the pieces (B, P, P) — ``where`` (B, T+1) is each word's
    piece — by two scatters, with no host read.  Padding words (all of whose relations are 0) are sent to a
    spare piece P that is cut off, so that they cannot overwrite ``[CLS]``, the piece their ``where`` names."""
    B, N = where.shape
    real = torch.cat([mask.new_ones((B, 1)), mask], dim=1)
    target = torch.where(real, where, pieces)
    rows = relations.new_zeros((B, pieces + 1, N)).scatter(1, target[:, :, None].expand(B, N, N), relations)
    out = relations.new_zeros((B, pieces + 1, pieces + 1)).scatter(2, target[:, None, :].expand(B, pieces + 1, N),
                                                                   rows)
    return out[:, :pieces, :pieces]
