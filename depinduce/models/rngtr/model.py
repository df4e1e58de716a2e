"""The RNGTr / SynTr network: graph-conditioned encoder + biaffine scorers + the refinement loop, batched.

Pass 0 reads the initial graph: none (SynTr, a plain transformer) or any given parse (``--init FILE``).  Each of
up to T further passes reads the previous pass's argmax graph — every word's best head and its best label under
that head — and the loop stops as soon as a pass's graph equals its input for every sentence of the batch (the
next pass would see the same input again).  Training takes the loss at every pass (the objective averages them);
parsing hands the last pass's arc and label scores to the shared decoders (Chu-Liu/Edmonds with exactly one root
by default), which label each word under its decoded head.

With one network, ``--init empty`` and ``--init synTr`` start from the same no-graph pass; the paper's
SynTr+RNGTr uses a separately trained SynTr, which depinduce gets by passing SynTr's output as ``--init FILE``
(a model trained with ``iterations: 0`` is SynTr).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from depinduce.models.rngtr.attention import relation_ids
from depinduce.models.rngtr.config import RNGTrConfig
from depinduce.models.rngtr.encoder import GraphEncoder
from depinduce.models.rngtr.scorers import ArcScorer, LabelScorer

Graph = tuple[torch.Tensor, torch.Tensor]  # heads (B, T) in 0..T (negative = no arc), label ids (B, T)
Pieces = dict[str, torch.Tensor]  # word pieces of a BERT-initialised encoder (bert.PieceTokenizer.encode)


@dataclass
class FinalScores:
    """The last pass of a batch: arc log-probabilities (B, T, T+1) (column 0 = ROOT), label log-probabilities
    (B, T, T+1, L) of every (word, head) pair, and how many passes ran."""

    arcs: torch.Tensor
    labels: torch.Tensor
    passes: int


class RNGTrNetwork(nn.Module):
    """The torch module behind the ``rngtr`` backend (``iterations: 0`` = SynTr)."""

    def __init__(self, config: RNGTrConfig, n_words: int, n_upos: int, n_labels: int, pad_index: int = 0,
                 *, n_pieces: int | None = None) -> None:
        super().__init__()
        self.config = config
        self.n_labels = n_labels
        self.encoder = GraphEncoder(config, n_words, n_upos, n_labels, pad_index, n_pieces=n_pieces)
        self.arc = ArcScorer(config.hidden_size, config.arc_mlp_size, config.mlp_dropout)
        self.label = LabelScorer(config.hidden_size, config.label_mlp_size, n_labels, config.mlp_dropout)

    def encode(self, tokens: torch.Tensor, upos: torch.Tensor, mask: torch.Tensor, graph: Graph | None,
               pieces: Pieces | None = None) -> torch.Tensor:
        """Hidden states (B, T+1, H) of one pass conditioned on ``graph`` (None: no graph)."""
        relations = None if graph is None else relation_ids(graph[0], graph[1], mask, self.n_labels)
        return self.encoder(tokens, upos, mask, relations, pieces)

    def _argmax_graph(self, hidden: torch.Tensor, arc: torch.Tensor) -> Graph:
        heads = arc.argmax(dim=-1)
        labels = self.label.at_heads(hidden, heads).argmax(dim=-1)
        return heads, labels

    @staticmethod
    def _same(graph: Graph | None, new: Graph, mask: torch.Tensor) -> bool:
        if graph is None:
            return False
        return bool(((graph[0] == new[0]) & (graph[1] == new[1]) | ~mask).all())

    def _passes(self, tokens, upos, mask, init: Graph | None, iterations: int | None = None,
                pieces: Pieces | None = None):
        """Yield (hidden, arc) per pass, following the refinement schedule (``iterations`` overrides the
        configured T) and the early stop."""
        last = self.config.iterations if iterations is None else iterations
        graph = init
        for step in range(last + 1):
            hidden = self.encode(tokens, upos, mask, graph, pieces)
            arc = self.arc(hidden, mask)
            yield hidden, arc
            if step == last:
                return
            with torch.no_grad():
                new = self._argmax_graph(hidden, arc)
            if self._same(graph, new, mask):
                return
            graph = new

    def arc_label_logits(self, tokens: torch.Tensor, mask: torch.Tensor, heads: torch.Tensor, *,
                         upos: torch.Tensor, init_heads: torch.Tensor | None = None,
                         init_labels: torch.Tensor | None = None, **pieces: torch.Tensor
                         ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The supervised objective's hook: per pass (arc (B, T, T+1), label logits (B, T, L) at the gold
        ``heads``).  Intermediate graphs are argmax decisions, so no gradient flows between passes.
        ``pieces``: word-piece tensors for a BERT-initialised encoder."""
        init = None if init_heads is None else (init_heads, init_labels if init_labels is not None
                                                else torch.zeros_like(init_heads))
        return [(arc, self.label.at_heads(hidden, heads))
                for hidden, arc in self._passes(tokens, upos, mask, init, pieces=pieces or None)]

    @torch.no_grad()
    def final_scores(self, tokens: torch.Tensor, upos: torch.Tensor, mask: torch.Tensor,
                     init: Graph | None = None, *, iterations: int | None = None,
                     pieces: Pieces | None = None) -> FinalScores:
        """Refine, then score the last pass for the shared decoders (MST with one root by default)."""
        passes = 0
        for hidden, arc in self._passes(tokens, upos, mask, init, iterations, pieces):
            passes += 1
        arcs = F.log_softmax(arc.float(), dim=-1)
        labels = F.log_softmax(self.label.all_pairs(hidden).float(), dim=-1)
        return FinalScores(arcs, labels, passes)
