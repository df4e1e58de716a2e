"""PRPN (Shen et al. 2018, "Neural language modeling by jointly learning syntax and lexicon"): a recurrent
language model whose skip connections are gated by syntactic distances; the distances parse the sentence.

Parsing network (``parsing.py``) → distances d_t and next-distance guesses → stick-breaking gates; reading
network (``reading.py``, n_layers layer-normalised LSTM layers) attends over its last S states through the
reading gates; predict network attends over the top layer's past states through the predicting gates and
feeds the output layer, which is tied to the embedding.  Trained by the engine's next-word objective, one
sentence at a time (state reset per sentence) or as continuous text with truncated backpropagation.

The sentence boundary is one extra symbol, index ``len(vocab)``: it starts every sentence (the paper's
``<s>``) and is predicted after the last word (``</s>``); in continuous text it separates sentences — one
symbol for both roles, as in the Mikolov PTB language-model data, so a model trained either way parses the same.

Differences from the authors' code: the layers run one after the other over the whole sequence instead of all
layers per time step (the same function: the gates do not depend on the hidden states), which lets each layer
compute its input transformations for all positions at once; BatchNorm statistics cover real positions only, so
padding never changes a result (on a GPU by masked sums, without a host sync: ``layers/masked_norm.py``).  Switches: ``layer_norm`` (torch's by default, the authors' form as the paper
setting) and ``dropout_placement`` (the authors' by default).  The attention normaliser, the initialisation and
the predict network's memory (h_(t−1) … h_(t−S), as the authors' code reads it) are the authors'.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from depinduce.data.vocab import Vocab
from depinduce.models.base import Induces, ParseScores
from depinduce.models.contracts import NextWordLMBackend, StreamingLMBackend
from depinduce.models.layers.dropout import apply_dropout
from depinduce.models.layers.memory import limit_onednn_primitive_cache, release_free_heap
from depinduce.models.neural import LinearOutputLayer
from depinduce.models.prpn.config import PRPNConfig
from depinduce.models.prpn.parsing import ParsingNetwork, stick_breaking_gates
from depinduce.models.prpn.reading import PredictNetwork, ReadingLayer
from depinduce.structures.spans import word_depths_to_split_distances


@dataclass
class StreamState:
    """What continuous text carries from one chunk to the next (all detached, batch-first)."""

    embeddings: torch.Tensor  # (B, lookback, E): the last embeddings, oldest first (parsing network window)
    distances: torch.Tensor  # (B, S): the last distances, oldest first (gates)
    top: torch.Tensor  # (B, S, H): the top layer's last states, oldest first (predict network)
    tapes: list[torch.Tensor]  # per reading layer (B, S, 2H): the last (h, c) pairs, newest first

    def as_tensors(self) -> list[torch.Tensor]:
        return [self.embeddings, self.distances, self.top, *self.tapes]

    @classmethod
    def from_tensors(cls, tensors: list[torch.Tensor]) -> "StreamState":
        return cls(tensors[0], tensors[1], tensors[2], list(tensors[3:]))


class PRPN(LinearOutputLayer, NextWordLMBackend, StreamingLMBackend):
    """Parsing-Reading-Predict Network: a next-word language model that induces constituency trees."""

    name = "prpn"
    description = "PRPN (Shen et al. 2018): language model with distance-gated skip connections; constituency"
    induces = Induces(dependency=False, constituency=True)
    default_recipes = {"cpu": "prpn-ptb-cpu", "cuda": "prpn-ptb"}
    config_class = PRPNConfig
    parser_modules = ("parser",)  # what train.parser_lr applies to

    def __init__(self, config: PRPNConfig, vocab: Vocab) -> None:
        super().__init__(config, vocab)
        limit_onednn_primitive_cache()  # every batch length is a new oneDNN primitive (layers/memory.py)
        self.boundary_index = len(vocab)
        self.embedding = nn.Embedding(len(vocab) + 1, config.emb_size)
        authors_init = config.init == "authors"
        self.parser = ParsingNetwork(config.emb_size, config.hidden_size, config.lookback, config.idropout,
                                     authors_init=authors_init)
        self.readers = nn.ModuleList(
            ReadingLayer(config.emb_size if i == 0 else config.hidden_size, config.hidden_size,
                         config.dropout if i == 0 else config.idropout, config.rdropout,
                         key_dropout=config.idropout, placement=config.dropout_placement, norm=config.layer_norm,
                         authors_init=authors_init)
            for i in range(config.n_layers)
        )
        self.predictor = PredictNetwork(config.hidden_size, config.emb_size, config.idropout,
                                        placement=config.dropout_placement, authors_init=authors_init)
        self.output_bias = nn.Parameter(torch.zeros(len(vocab) + 1))
        nn.init.uniform_(self.embedding.weight, -0.01, 0.01)  # the authors' initial range

    # ------------------------------------------------------------------------------------------ network

    def _run(self, inputs: torch.Tensor, rows: torch.Tensor, state: StreamState | None
             ) -> tuple[torch.Tensor, StreamState]:
        """Predict-network outputs (B, T, E) at the positions ``rows`` marks (zero elsewhere), and the state after
        the sequence."""
        if self.training and inputs.device.type == "cpu" and torch.is_grad_enabled():
            release_free_heap()  # a training step starts here (layers/memory.py)
        config = self.config
        batch = inputs.shape[0]
        embedded = self.embedding(inputs)
        distance, next_distance = self.parser(embedded, rows, None if state is None else state.embeddings)
        previous = (embedded.new_full((batch, config.n_slots), float("inf")) if state is None
                    else state.distances)
        hard = config.gate == "hard"
        reading_gates = stick_breaking_gates(distance, distance, previous, resolution=config.resolution, hard=hard)
        predicting_gates = stick_breaking_gates(next_distance, distance, previous, resolution=config.resolution,
                                                hard=hard)
        x = embedded
        tapes = []
        for k, reader in enumerate(self.readers):
            x, tape = reader(x, reading_gates, None if state is None else state.tapes[k])
            tapes.append(tape)
        output = self.predictor(x, predicting_gates, rows, None if state is None else state.top)
        lookback, slots = config.lookback, config.n_slots
        history = embedded if state is None else torch.cat([state.embeddings, embedded], dim=1)
        tops = x if state is None else torch.cat([state.top, x], dim=1)
        new_state = StreamState(
            embeddings=_last(history, lookback),
            distances=torch.cat([previous, distance], dim=1)[:, -slots:],
            top=_last(tops, slots),
            tapes=tapes,
        )
        return output, new_state

    def lm_hidden(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T+1, E) for sentences ``tokens`` (B, T): position t has read the boundary and words 0..t−1 and
        predicts word t; position n predicts the closing boundary.  Each sentence starts from a zero state."""
        batch = tokens.shape[0]
        start = tokens.new_full((batch, 1), self.boundary_index)
        inputs = torch.cat([start, tokens], dim=1)
        rows = torch.cat([mask.new_ones(batch, 1), mask], dim=1)
        return self._run(inputs, rows, None)[0]

    def lm_stream(self, tokens: torch.Tensor, state: list[torch.Tensor] | None
                  ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Continuous text: hidden states (B, T, E) for ``tokens`` (B, T), position t predicting token t+1, and
        the state to pass with the next chunk (``state`` None: the streams start here)."""
        rows = torch.ones_like(tokens, dtype=torch.bool)
        output, new_state = self._run(tokens, rows, None if state is None else StreamState.from_tensors(state))
        return output, [t.detach() for t in new_state.as_tensors()]

    def output_layer(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Dropout, then the output layer tied to the embedding: logits over the vocabulary and the boundary.

        ``<pad>`` and ``<mask>`` keep their columns (never targets, training drives their probability to ~0):
        masking them would copy the largest tensor of the step for two columns."""
        return apply_dropout(hidden, self.config.dropout, self.training), self.embedding.weight, self.output_bias

    # ------------------------------------------------------------------------------------------ parsing

    def word_depths(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T): each word's distance to the word before it (the first word's: to the sentence start)."""
        batch = tokens.shape[0]
        inputs = torch.cat([tokens.new_full((batch, 1), self.boundary_index), tokens], dim=1)
        rows = torch.cat([mask.new_ones(batch, 1), mask], dim=1)
        distance, _ = self.parser(self.embedding(inputs), rows)
        return distance[:, 1:]

    def score_tensors(self, tokens: torch.Tensor, mask: torch.Tensor) -> list[ParseScores]:
        """Split distances only (PRPN induces constituency): with ``tree: paper`` the appendix-A parser's tree
        expressed as split distances, with ``tree: distances`` the gaps between adjacent words."""
        depths = self.word_depths(tokens, mask)
        scores = []
        for b, n in enumerate(mask.sum(dim=-1).tolist()):
            words = depths[b, :n]  # the model's dtype: a float64 model's scores stay float64
            if self.config.tree == "paper":
                split = torch.tensor(word_depths_to_split_distances(words.tolist()), dtype=words.dtype)
            else:
                split = words[1:].clone()
            scores.append(ParseScores(distances=split))
        return scores


def _last(sequence: torch.Tensor, count: int) -> torch.Tensor:
    """The last ``count`` positions of (B, T, ...), left-padded with zeros when T is shorter."""
    if sequence.shape[1] >= count:
        return sequence[:, -count:]
    pad = sequence.new_zeros(sequence.shape[0], count - sequence.shape[1], *sequence.shape[2:])
    return torch.cat([pad, sequence], dim=1)
