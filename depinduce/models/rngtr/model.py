"""The RNGTr / SynTr network: graph-conditioned encoder + biaffine scorers + the refinement loop, batched.

Pass 0 reads the initial graph: none (SynTr, a plain transformer) or any given parse (``--init FILE``).  Each of
up to T further passes reads the previous pass's graph — every word's best head and its best label under that
head.  A *sentence* stops as soon as a pass's graph equals the one before it (the paper's §3.3 and the authors'
code): it leaves the batch, so later passes neither attend over it nor train on it (the batch goes on with the
others).  Training takes the loss at every pass (the objective combines them, or steps once per pass with
``updates: per_pass``); parsing hands each sentence's scores (by default from its last pass) to the shared
decoders (Chu-Liu/Edmonds with exactly one root by default), which label each word under its decoded head.

With one network, ``--init empty`` and ``--init synTr`` start from the same no-graph pass; the paper's
SynTr+RNGTr uses a separately trained SynTr, which depinduce gets by passing SynTr's output as ``--init FILE``
(a model trained with ``iterations: 0`` is SynTr).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from depinduce.models.layers.kernels import on_cpu_route
from depinduce.models.rngtr.attention import relation_ids
from depinduce.models.rngtr.config import RNGTrConfig
from depinduce.models.rngtr.decoders import probability_tree
from depinduce.models.rngtr.encoder import GraphEncoder
from depinduce.models.rngtr.scorers import ArcScorer, LabelScorer

Graph = tuple[torch.Tensor, torch.Tensor]  # heads (B, T) in 0..T (negative = no arc), label ids (B, T)
Pieces = dict[str, torch.Tensor]  # word pieces of a BERT-initialised encoder (bert.PieceTokenizer.encode)


class Pass(NamedTuple):
    """One refinement pass over the sentences still refining: ``rows`` (b,) their indices in the batch, their
    ``mask`` (b, T), ``hidden`` (b, T+1, H), ``arc`` scores (b, T, T+1), and ``stops`` (b,): the sentences whose
    refinement ends with this pass (all of them at the last pass), ``converged`` those of them whose graph no
    longer changed.  A static schedule (``_passes(static=True)``) runs every pass on the whole batch: b = B and
    ``rows`` is a (B,) boolean mask of the sentences still refining (``stops`` and ``converged`` lie within it)."""

    index: int
    rows: torch.Tensor
    mask: torch.Tensor
    hidden: torch.Tensor
    arc: torch.Tensor
    stops: torch.Tensor
    converged: torch.Tensor  # (b,) stops because its graph no longer changed (not because T passes ran)


class PassLogits(NamedTuple):
    """What the supervised objective reads of one pass: arc scores (b, T, T+1), label logits (b, T, L) at the
    gold heads, and the b batch ``rows`` the pass ran on (the sentences not yet stopped) — or, off the CPU's
    route, scores of all B rows and ``rows`` a (B,) boolean mask of those not yet stopped."""

    arc: torch.Tensor
    label: torch.Tensor
    rows: torch.Tensor


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

    def _tree_graph(self, hidden: torch.Tensor, arc: torch.Tensor, mask: torch.Tensor) -> Graph:
        """The authors' MST graph (``first_graph: mst``): each sentence's tree by their decoder (probabilities,
        one-root heuristic), each word labelled under its tree head."""
        log_probs = F.log_softmax(arc.detach().double(), dim=-1).cpu()  # one transfer, not one per sentence
        heads = torch.zeros(arc.shape[:2], dtype=torch.long)
        for b, n in enumerate(mask.sum(dim=-1).tolist()):
            full = torch.full((n + 1, n + 1), float("-inf"), dtype=torch.float64)
            full[1:] = log_probs[b, :n, : n + 1]
            heads[b, :n] = torch.as_tensor(probability_tree(full))
        heads = heads.to(arc.device, non_blocking=True)  # no stream sync; a pageable source is read at once
        return heads, self.label.at_heads(hidden, heads).argmax(dim=-1)

    def _read(self, graph: Graph) -> Graph:
        """The argmax graph as the next pass reads it: with ``graph_cycles: drop`` (the authors' code) both arcs
        of every 2-cycle (x the head of y and y the head of x) left out (head −1: no arc)."""
        if self.config.graph_cycles != "drop":
            return graph
        heads, labels = graph
        words = torch.arange(1, heads.size(1) + 1, device=heads.device)
        has_word_head = heads > 0
        head_of_head = heads.gather(1, (heads - 1).clamp(min=0))  # the head of each word's head (junk for ROOT)
        cycle = has_word_head & (head_of_head == words[None, :])
        return heads.masked_fill(cycle, -1), labels

    @staticmethod
    def _same(a: Graph, b: Graph, mask: torch.Tensor) -> torch.Tensor:
        """(B,) whether each sentence's two graphs agree on every real word's head and label."""
        return ((a[0] == b[0]) & (a[1] == b[1]) | ~mask).all(dim=-1)

    def _passes(self, tokens: torch.Tensor, upos: torch.Tensor, mask: torch.Tensor, init: Graph | None,
                iterations: int | None = None, pieces: Pieces | None = None, *,
                static: bool = False) -> Iterator[Pass]:
        """The refinement schedule, one :class:`Pass` at a time (``iterations`` overrides the configured T).

        Each pass runs on the sentences still refining.  Its ``stops`` are decided before it is yielded, from
        its own outputs alone, so a caller that updates the weights between passes (``updates: per_pass``)
        changes only what later passes compute — as the authors' trainer does.  A sentence stops when its graph
        after this pass equals its graph after the previous pass (the initial graph, for pass 0 with ``init``).

        ``static`` (the training step off the CPU's route): every pass runs on the whole batch and the stopped
        sentences are masked out of ``rows`` instead of dropped, since dropping them by a boolean index makes
        the host wait for the device.  A sentence's pass does not depend on the other sentences (the encoder
        and scorers work per sentence), so the passes compute what the dropping schedule computes; the host is
        read once per pass, for whether another pass runs (more passes would mean more per-pass updates).

        ``first_graph: mst`` reproduces the authors' code: the first pass that reads a graph reads the previous
        pass's MST tree (not its argmax graph), and that first graph pass is summarised by its MST tree in the
        stop test (so it is compared with the argmax graph before it, and the next pass's argmax with it)."""
        last = self.config.iterations if iterations is None else iterations
        trees = self.config.first_graph == "mst"
        first_graph_pass = 0 if init is not None else 1
        B = tokens.shape[0]
        rows = (torch.ones(B, dtype=torch.bool, device=tokens.device) if static
                else torch.arange(B, device=tokens.device))
        graph, before = init, init  # the graph the next pass reads; the graph the stop test compares with
        for step in range(last + 1):
            if static:
                sub, piece = {"tokens": tokens, "upos": upos, "mask": mask}, pieces
            else:
                sub = {"tokens": tokens[rows], "upos": upos[rows], "mask": mask[rows]}
                piece = None if pieces is None else {k: v[rows] for k, v in pieces.items()}
            hidden = self.encode(sub["tokens"], sub["upos"], sub["mask"], graph, piece)
            arc = self.arc(hidden, sub["mask"])
            converged = torch.zeros(len(rows), dtype=torch.bool, device=rows.device)
            next_graph = summary = None
            if step < last or (before is not None and self.config.decode_pass == "previous"):
                with torch.no_grad():
                    argmax = self._argmax_graph(hidden, arc)
                    next_graph = (self._tree_graph(hidden, arc, sub["mask"])
                                  if trees and step + 1 == first_graph_pass else self._read(argmax))
                    summary = (self._tree_graph(hidden, arc, sub["mask"])
                               if trees and step == first_graph_pass else argmax)
                    if before is not None:
                        converged = self._same(before, summary, sub["mask"])
            if static:
                converged = converged & rows
                stops = (converged | rows) if step == last else converged
            else:
                stops = converged | (step == last)
            yield Pass(step, rows, sub["mask"], hidden, arc, stops, converged)
            if step == last:
                return
            # with no graph to compare with (pass 0 without ``init``) no sentence can stop: nothing to read
            may_stop = before is not None or B == 0
            if static:
                rows = rows & ~stops
                if may_stop and not bool(rows.any()):
                    return
                graph, before = next_graph, summary
                continue
            if may_stop and bool(stops.all()):
                return
            keep = ~stops
            rows = rows[keep]
            graph = (next_graph[0][keep], next_graph[1][keep])
            before = (summary[0][keep], summary[1][keep])

    def arc_label_passes(self, tokens: torch.Tensor, mask: torch.Tensor, heads: torch.Tensor, *,
                         upos: torch.Tensor, init_heads: torch.Tensor | None = None,
                         init_labels: torch.Tensor | None = None, **pieces: torch.Tensor) -> Iterator[PassLogits]:
        """The supervised objective's hook, one pass at a time: (arc (b, T, T+1), label logits (b, T, L) at the
        gold ``heads``, the b batch rows the pass ran on; off the CPU's route every row and a (B,) mask of those
        still refining, see :meth:`_passes`).  Intermediate graphs are argmax (or MST) decisions, so no
        gradient flows between passes."""
        init = None if init_heads is None else (init_heads, init_labels if init_labels is not None
                                                else torch.zeros_like(init_heads))
        static = not on_cpu_route(tokens)  # off the CPU's route: whole-batch passes, no host read but one a pass
        for p in self._passes(tokens, upos, mask, init, pieces=pieces or None, static=static):
            yield PassLogits(p.arc, self.label.at_heads(p.hidden, heads if static else heads[p.rows]), p.rows)

    def arc_label_logits(self, tokens: torch.Tensor, mask: torch.Tensor, heads: torch.Tensor, *,
                         upos: torch.Tensor, init_heads: torch.Tensor | None = None,
                         init_labels: torch.Tensor | None = None, **pieces: torch.Tensor) -> list[PassLogits]:
        """Every pass of :meth:`arc_label_passes` at once."""
        return list(self.arc_label_passes(tokens, mask, heads, upos=upos, init_heads=init_heads,
                                          init_labels=init_labels, **pieces))

    @torch.no_grad()
    def final_scores(self, tokens: torch.Tensor, upos: torch.Tensor, mask: torch.Tensor,
                     init: Graph | None = None, *, iterations: int | None = None,
                     pieces: Pieces | None = None) -> FinalScores:
        """Refine, then score each sentence for the shared decoders (MST with one root by default): from the pass
        at which it stopped (``decode_pass: last``), or from the pass before (``previous``, the authors' code:
        a sentence that stops at pass t is decoded from pass t−1; its argmax graph is the same, its MST may not
        be)."""
        B, T = tokens.shape
        dtype = self._score_dtype()
        arcs = torch.zeros((B, T, T + 1), dtype=dtype, device=tokens.device)
        labels = torch.zeros((B, T, T + 1, self.n_labels), dtype=dtype, device=tokens.device)
        previous = self.config.decode_pass == "previous"
        kept: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # rows, hidden, arc of the pass before
        passes = 0
        for p in self._passes(tokens, upos, mask, init, iterations, pieces):
            passes += 1
            if previous and kept is not None:  # converged at this pass: the pass before is decoded
                back = p.converged
                if back.any():
                    where = {r: k for k, r in enumerate(kept[0].tolist())}
                    pick = torch.as_tensor([where[r] for r in p.rows[back].tolist()], device=p.rows.device)
                    self._store(arcs, labels, p.rows[back], kept[1][pick], kept[2][pick])
                done = p.stops & ~back
            else:
                done = p.stops
            if done.any():
                self._store(arcs, labels, p.rows[done], p.hidden[done], p.arc[done])
            kept = (p.rows, p.hidden, p.arc)
        return FinalScores(arcs, labels, passes)

    def _store(self, arcs: torch.Tensor, labels: torch.Tensor, rows: torch.Tensor, hidden: torch.Tensor,
               arc: torch.Tensor) -> None:
        """Write the decoders' log-probabilities of the sentences ``rows`` from one pass's outputs."""
        arcs[rows] = F.log_softmax(arc.to(arcs.dtype), dim=-1)
        labels[rows] = F.log_softmax(self.label.all_pairs(hidden).to(labels.dtype), dim=-1)

    def _score_dtype(self) -> torch.dtype:
        """The decoders' log-probabilities: float32, or float64 in a float64 network (no silent narrowing)."""
        return torch.promote_types(next(self.parameters()).dtype, torch.float32)
