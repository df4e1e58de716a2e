"""The Probabilistic Transformer (Wu and Tu 2023): a CRF over latent word labels and dependency heads whose
mean-field inference is the network (``inference.py``; the ternary scores' forms are in ``factors.py``).

Network: word embedding (the unary scores x, d wide, Xavier-uniform as the authors') → ``n_iter`` mean-field
iterations → the final unnormalised label scores q_z → an output layer of its own (not tied to the embedding, as
in the paper) computed at the masked positions only.  Trained with the engine's masked-LM objective plus
``regularizer()`` = ``ternary_l2`` · ‖T‖_F, the Frobenius norm of the reconstructed ternary tensor (paper
appendix E; the authors' ``getTernaryNorm``), and in the root variant the root tensor's norm as a separate term
(``root_norm``).

Parsing (``score_tensors``).  The head marginals Q_h of the last iteration are averaged over the channels (or one
channel is used: :meth:`select_channel`, ``parse --channel``; choose it on dev data with ``depinduce analyze
channels``, never on test data).  Word-to-word scores are log Q̄_h[i, j].  The ROOT column:

- with ``root: true``, the marginal of the ROOT head option, log Q̄_h[i, ROOT]: each row is a log-distribution
  over {ROOT, the other words};
- without it the CRF has no ROOT (the paper's MLM model), and depinduce scores ROOT → i with the log of the share
  of all head mass that word i receives, log(Σ_j Q̄_h[j, i] / n).  Why: every word's head distribution must go
  somewhere in the sentence, and a sentence's root is the word the others (directly) depend on most — a
  predicate collects its subject, object and modifiers.  The score is itself a distribution over the n words,
  on the same scale as a row of Q̄_h, so MST (exactly one root) trades the root's own best head against the
  mass it receives; ``argmax`` takes ROOT only for a word whose share of the received mass is at least the
  probability of its own best head (it may give no root or several: argmax is not a tree decoder).  Scoring
  every root 0 instead, as UDGN's authors do, would make ``argmax`` attach every word to ROOT.

Probabilities are floored at float32's smallest normal number before the log, so decoders see finite scores.

``--probs`` prints the distribution the chosen decoder reads (:meth:`Backend.word_head_probs`).  For the shared
decoders each row of the scores made a distribution: with ROOT the marginals Q̄_h as they are; without it the
received share s_i normalised with the word's row, [s_i, Q̄_h[i, ·]] / (1 + s_i) — the ROOT score they decide by,
as a probability (dividing a row by a constant changes no argmax, MST or Eisner tree).  A one-word sentence's row
is ROOT = 1.  The authors' decoders read their own matrix (``decoders.py``).

The authors' own decoding (``probformer-argmax``, ``-nonprojective``, ``-projective``: sums of probabilities, ROOT
at probability 0 without the ROOT node) is in ``decoders.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from depinduce.data.vocab import Vocab
from depinduce.errors import ModelError, UsageError
from depinduce.models.base import Induces, ParseScores
from depinduce.models.contracts import MaskedLMBackend
from depinduce.models.layers.memory import limit_onednn_primitive_cache, release_free_heap
from depinduce.models.neural import LinearOutputLayer, pad_batch
from depinduce.models.probformer.config import ProbFormerConfig
from depinduce.models.probformer.decoders import authors_decoders
from depinduce.models.probformer.inference import Marginals, MeanField

_FLOOR = torch.finfo(torch.float32).tiny


def _norm(squared: torch.Tensor) -> torch.Tensor:
    """√ of a squared norm, with a finite gradient at 0."""
    return squared.clamp_min(1e-30).sqrt()


def head_scores(heads: torch.Tensor, root: torch.Tensor | None) -> torch.Tensor:
    """The (n+1)×(n+1) head-score matrix of one sentence from its word-head marginals ``heads`` (n, n) and its
    ROOT marginals ``root`` (n,) or None (then ROOT → i scores the share of head mass word i receives; see the
    module docstring).  Row 0 and the diagonal are −inf."""
    n = heads.size(0)
    if root is None:
        received = heads.sum(dim=0)
        total = received.sum()
        root = received / total if total > 0 else torch.ones_like(received)
    dtype = torch.promote_types(heads.dtype, torch.float32)  # a float64 model's scores stay float64
    out = torch.full((n + 1, n + 1), float("-inf"), dtype=dtype, device=heads.device)
    out[1:, 1:] = heads.to(dtype).clamp_min(_FLOOR).log()
    out[1:, 0] = root.to(dtype).clamp_min(_FLOOR).log()
    out[1:, 1:].fill_diagonal_(float("-inf"))
    return out


class ProbFormer(LinearOutputLayer, MaskedLMBackend):
    """A syntactic CRF whose mean-field inference resembles a transformer; its channels' head marginals are
    unsupervised dependency structures.  Gives dependencies."""

    name = "probformer"
    description = "Probabilistic Transformer (Wu and Tu 2023): CRF over latent labels and heads, mean-field inference"
    induces = Induces(dependency=True, constituency=False)
    head_probs = "scores"  # its head marginals Q_h (the channels' average, or --channel's)
    default_recipes = {"cpu": "probformer-ptb-cpu", "cuda": "probformer-ptb"}
    config_class = ProbFormerConfig
    # The paper's MLM model has no ROOT node: its decoders give ROOT probability 0.
    own_decoders = authors_decoders(root_node=False)

    def __init__(self, config: ProbFormerConfig, vocab: Vocab) -> None:
        super().__init__(config, vocab)
        if config.root:  # same names; the authors' decoders then read the ROOT marginal (parse looks them up here)
            self.own_decoders = authors_decoders(root_node=True)
        limit_onednn_primitive_cache()  # see layers/memory.py
        self.embedding = nn.Embedding(len(vocab), config.d)
        nn.init.xavier_uniform_(self.embedding.weight)
        self.mean_field = MeanField(config)
        self.output = nn.Linear(config.d, len(vocab))
        self.channel: int | None = None  # 1-based channel used for parsing; None = the channels' average

    @property
    def n_channels(self) -> int:
        return self.config.n_channels

    # ------------------------------------------------------------------------------------------------ training

    def infer(self, tokens: torch.Tensor, mask: torch.Tensor, *, record: bool = False) -> Marginals:
        """Mean-field inference for a padded batch (``tokens``/``mask`` (B, T))."""
        return self.mean_field(self.embedding(tokens), mask, record=record)

    def encode(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.training and tokens.device.type == "cpu" and torch.is_grad_enabled():
            release_free_heap()  # between training steps: hand fragmented heap pages back (layers/memory.py)
        return self.infer(tokens, mask).q_z

    def output_layer(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The untied output layer over the final unnormalised label scores (already dropped out)."""
        return hidden, self.output.weight, self.output.bias

    def regularizer(self) -> torch.Tensor | None:
        """``ternary_l2`` · ‖T‖_F, plus with ROOT ``ternary_l2`` · ‖T_root‖_F (``root_norm: separate``, the
        authors') or instead one norm of both, √(‖T‖² + ‖T_root‖²) (``joint``).  None when the weight is 0."""
        if self.config.ternary_l2 == 0:
            return None
        words, root = self.mean_field.squared_norms()
        if root is None:
            norm = _norm(words)
        elif self.config.root_norm == "separate":
            norm = _norm(words) + _norm(root)
        else:
            norm = _norm(words + root)
        return self.config.ternary_l2 * norm

    # ------------------------------------------------------------------------------------------------- parsing

    def select_channel(self, channel: int | None) -> None:
        """Parse with channel ``channel`` (1..C) alone; None: the average over all channels (the default)."""
        if channel is not None and not (isinstance(channel, int) and 1 <= channel <= self.n_channels):
            raise UsageError(f"--channel {channel} is out of range: model '{self.name}' has channels "
                             f"1..{self.n_channels}")
        self.channel = channel

    @torch.no_grad()
    def head_marginals(self, tokens: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Q_h (B, C, T, T) and, with ROOT, Q_h[·, ·, ROOT] (B, C, T), computed in eval mode (no dropout)."""
        was_training = self.training
        self.eval()
        try:
            found = self.infer(tokens, mask)
        finally:
            self.train(was_training)
        return found.heads, found.root

    def score_tensors(self, tokens: torch.Tensor, mask: torch.Tensor) -> list[ParseScores]:
        """Per sentence of n words: ``heads`` (n+1)×(n+1) from the selected channel or the channels' average
        (:func:`head_scores`)."""
        heads, root = self.head_marginals(tokens, mask)
        return self._view_scores(heads, root, mask, self.channel)

    def channel_parse_scores(self, sentences: Sequence[Sequence[str]]) -> list[list[ParseScores]]:
        """For ``analyze channels``: per sentence, the ParseScores of channel 1, …, channel C and then of the
        average — each exactly what ``parse_scores`` gives with that :meth:`select_channel` — from one inference."""
        rows = [self.vocab.encode(words) for words in sentences]
        tokens, mask = pad_batch(rows, self.vocab.pad_index)
        tokens, mask = tokens.to(self.device), mask.to(self.device)
        with torch.inference_mode():
            heads, root = self.head_marginals(tokens, mask)
            views = [self._view_scores(heads, root, mask, k) for k in [*range(1, self.n_channels + 1), None]]
        return [[ParseScores(heads=view[b].heads.float().cpu()) for view in views] for b in range(len(rows))]

    @staticmethod
    def _view_scores(heads: torch.Tensor, root: torch.Tensor | None, mask: torch.Tensor,
                     channel: int | None) -> list[ParseScores]:
        if channel is None:
            heads = heads.mean(dim=1)
            root = root.mean(dim=1) if root is not None else None
        else:
            heads = heads[:, channel - 1]
            root = root[:, channel - 1] if root is not None else None
        return [
            ParseScores(heads=head_scores(heads[b, :n, :n], None if root is None else root[b, :n]))
            for b, n in enumerate(mask.sum(dim=-1).tolist())
        ]

    @torch.no_grad()
    def sentence_representation(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The root label's final unnormalised scores (B, d_root) in eval mode: the paper's sentence
        representation (section 2.3.5).  Only for ``root: true``."""
        if self.mean_field.root_factor is None:
            raise ModelError(f"model '{self.name}' was trained without the ROOT node (root: false); "
                             "it has no sentence representation")
        was_training = self.training
        self.eval()
        try:
            q_root = self.infer(tokens, mask).q_root
        finally:
            self.train(was_training)
        assert q_root is not None
        return q_root
