"""The ``rngtr`` backend: :class:`~.model.RNGTrNetwork` behind the shared backend contract.

Unlike the unsupervised backends it reads whole sentences — every token, punctuation included, with its UPOS from
the input — because it was trained on them (see :mod:`depinduce.training.gold_data`), and it predicts labels.  The
parse pipeline asks it through :meth:`parse_sentences`; the punctuation-free ``parse_scores`` path cannot feed it
and says so.  A run trained with ``iterations: 0`` is SynTr.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import ClassVar

import torch

from depinduce.structures.sentence import Sentence
from depinduce.data.tags import TagVocab
from depinduce.data.vocab import Vocab
from depinduce.errors import ModelError, UsageError
from depinduce.io.initial_graphs import InitialGraph
from depinduce.models.base import Induces, ParseScores
from depinduce.models.contracts import RefinerBackend
from depinduce.models.neural import pad_batch
from depinduce.models.rngtr.bert import PieceTokenizer, bert_architecture, bert_state, copy_bert_weights
from depinduce.models.rngtr.config import RNGTrConfig
from depinduce.models.rngtr.decoders import AUTHORS_DECODERS
from depinduce.models.rngtr.model import FinalScores, Graph, PassLogits, RNGTrNetwork
from depinduce.models.views import WholeSentences


class RNGTr(RefinerBackend):
    """Graph-to-graph transformer: SynTr parses (pass 0), RNGTr refines up to T times."""

    name = "rngtr"
    description = ("RNGTr/SynTr (Mohammadshahi & Henderson 2021): supervised graph-to-graph transformer that parses "
                   "and refines any initial parse; reads UPOS, predicts labels")
    head_probs = "scores"  # the arc softmax of the final refinement pass (score_tensors)
    induces = Induces(dependency=True, constituency=False)
    input_view = WholeSentences(refines=True)  # every token with its UPOS, and an initial graph to refine
    default_recipes = {"cpu": "rngtr-ud-cpu", "cuda": "rngtr-ud"}
    config_class = RNGTrConfig
    needs_tags: ClassVar[bool] = True
    own_decoders = AUTHORS_DECODERS

    def __init__(self, config: RNGTrConfig, vocab: Vocab, tags: TagVocab) -> None:
        self.pieces: PieceTokenizer | None = None
        if config.encoder_path is not None:  # a BERT's shape and word pieces (its weights: copied below)
            self.pieces = PieceTokenizer(config.encoder_path)
            config = dataclasses.replace(config, **bert_architecture(config.encoder_path))
        super().__init__(config, vocab)
        self.tags = tags
        self.network = RNGTrNetwork(config, len(vocab), tags.n_upos, tags.n_labels, vocab.pad_index,
                                    n_pieces=None if self.pieces is None else self.pieces.vocab_size)
        if config.encoder_path is not None:  # a trained run's model.pt replaces these when it is loaded
            copy_bert_weights(self.network.encoder, bert_state(config.encoder_path))
        self.iterations: int | None = None  # parse-time override of config.iterations
        self.last_passes = 0  # passes of the latest batch (speed reports)

    # ---------------------------------------------------------------------------------------- training hooks

    def arc_label_passes(self, tokens: torch.Tensor, mask: torch.Tensor, heads: torch.Tensor, *,
                         upos: torch.Tensor, init_heads: torch.Tensor | None = None,
                         init_labels: torch.Tensor | None = None, **pieces: torch.Tensor) -> Iterator[PassLogits]:
        return self.network.arc_label_passes(tokens, mask, heads, upos=upos, init_heads=init_heads,
                                             init_labels=init_labels, **pieces)

    @property
    def updates_per_pass(self) -> bool:
        """The supervised objective steps the optimiser once per refinement pass (the authors' trainer)."""
        return self.config.updates == "per_pass"

    @property
    def max_passes(self) -> int:
        """Passes per batch at most: sizes the learning-rate schedule when there is one update per pass."""
        return self.config.iterations + 1

    def word_inputs(self, forms: Sequence[Sequence[str]]) -> dict[str, torch.Tensor]:
        """The word pieces of a BERT-initialised encoder (nothing for the default encoder)."""
        return {} if self.pieces is None else self.pieces.encode(forms)

    # ------------------------------------------------------------------------------------------------ parsing

    def set_iterations(self, iterations: int) -> None:
        if iterations < 0:
            raise UsageError(f"--iterations must be 0 or more, not {iterations}")
        self.iterations = iterations

    def score_tensors(self, tokens: torch.Tensor, mask: torch.Tensor, *, upos: torch.Tensor | None = None,
                      init: Graph | None = None, pieces: dict[str, torch.Tensor] | None = None
                      ) -> list[ParseScores]:
        """Per sentence of n tokens: ``heads`` (n+1)×(n+1) arc log-probabilities (row 0 −inf) and ``labels``
        (n+1)×(n+1)×L label log-probabilities, from the last refinement pass."""
        if upos is None:
            raise UsageError("rngtr reads UPOS tags with the words: parse CoNLL-U input with a UPOS column")
        final: FinalScores = self.network.final_scores(tokens, upos, mask, init, iterations=self.iterations,
                                                       pieces=pieces or None)
        self.last_passes = final.passes
        names = self.tags.decode_labels(range(self.tags.n_labels))
        out = []
        for b, n in enumerate(mask.sum(dim=-1).tolist()):
            heads = torch.full((n + 1, n + 1), float("-inf"), dtype=final.arcs.dtype)
            heads[1:] = final.arcs[b, :n, : n + 1].cpu()
            labels = torch.full((n + 1, n + 1, self.tags.n_labels), float("-inf"), dtype=final.labels.dtype)
            labels[1:] = final.labels[b, :n, : n + 1].cpu()
            out.append(ParseScores(heads=heads, labels=labels, label_names=names))
        return out

    def parse_scores(self, sentences: Sequence[Sequence[str]]) -> list[ParseScores]:
        raise ModelError("rngtr reads whole sentences with their UPOS tags; it cannot score bare words")

    def parse_sentences(self, sentences: Sequence[Sentence],
                        init: Sequence[InitialGraph | None] | None = None) -> list[ParseScores]:
        """Every token with its UPOS (missing UPOS is an error naming the sentence), refining ``init`` graphs."""
        for s in sentences:
            if s.upos is None or any(tag in ("_", "") for tag in s.upos):
                where = f"sentence {s.sent_id}" if s.sent_id else f"the sentence at line {s.line}"
                raise UsageError(f"{where} has no UPOS: rngtr reads UPOS tags from CoNLL-U input")
        tokens, mask = pad_batch([self.vocab.encode(s.words) for s in sentences], self.vocab.pad_index)
        upos, _ = pad_batch([self.tags.encode_upos(s.upos or []) for s in sentences], TagVocab.upos_pad_index)
        graph = None if init is None else self._initial_graph(init, tokens.shape[1])
        pieces = self.word_inputs([s.words for s in sentences])
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode():
                device = self.device
                return self.score_tensors(tokens.to(device), mask.to(device), upos=upos.to(device),
                                          init=None if graph is None else (graph[0].to(device), graph[1].to(device)),
                                          pieces={k: v.to(device) for k, v in pieces.items()})
        finally:
            self.train(was_training)

    def _initial_graph(self, init: Sequence[InitialGraph | None], width: int) -> Graph:
        """(heads, label ids) tensors; a sentence without an initial graph gets no arcs (head −1)."""
        heads = torch.full((len(init), width), -1, dtype=torch.long)
        labels = torch.zeros((len(init), width), dtype=torch.long)
        for b, graph in enumerate(init):
            if graph is not None:
                heads[b, : len(graph[0])] = torch.as_tensor(graph[0], dtype=torch.long)
                labels[b, : len(graph[1])] = torch.as_tensor(self.tags.encode_labels(graph[1]), dtype=torch.long)
        return heads, labels
