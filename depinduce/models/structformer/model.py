"""StructFormer (Shen et al. 2021): a masked-LM transformer whose attention follows an induced dependency graph.

The parser (``parser.py``) reads the shared word embedding and predicts syntactic distances and heights; the
distances are calibrated (per sentence, or per batch with ``margin: batch``); ``parent.py`` turns them into a
differentiable parent distribution P; each layer's attention is gated by a per-head mixture of P and Pᵀ
(``attention.py``).  Trained with the engine's masked-LM objective; ``score_tensors`` exposes what the shared
decoders need.

Choices that differ from the authors' code (and why), with the switch that restores theirs:
- the calibration margin is taken per sentence, not over the batch, so a sentence's structure in training does
  not depend on its batch-mates (``margin: batch`` is theirs; their test-time parse runs one sentence at a time,
  so parsing calibrates per sentence under either setting);
- tied maxima: the distance tree binarises left to right (``tree_ties: nary`` splits at every tied maximum, as
  theirs), and the shared ``argmax`` decoder keeps one root at a height tie (the ``structformer-argmax``
  decoder makes every tied word a root, as theirs);
- the parent contraction is exact but O(n³) through two batched matmuls instead of O(n⁴) over n³ tensors, with
  an exact (slower) fallback for sentences whose s1 × height range leaves float64's exponent range
  (``parent.py``);
- the head scores have a ROOT column, which the authors' test-time parse does not (it roots the highest word
  and takes every other word's most probable parent): r = softmax(s1 · height), the model's distribution over
  the sentence's head, whose argmax is that highest word (``sentence_root_scores``; ``mst``/``eisner`` choose
  the root with it, and ``parse --probs`` prints it);
- the output logits are computed only for the hidden states the engine passes (the masked positions), and in
  training the last layer's output projection and feed-forward block only at those positions
  (``encode_masked``; attention still reads every position, and the loss is the same).

Speed and memory on CPU (``attention.py`` and the shared ``depinduce.models.layers``: ``kernels``, ``dropout``,
``memory``): linear maps run through oneDNN, dropout masks are cheap to draw and kept for backward as bits,
attention weights are recomputed in backward instead of stored, residual sums are written in place, and
a training ``encode`` returns fragmented heap pages to the system when the resident set grows.  None of this
changes the numbers the network computes (up to float rounding); ``recompute_ffn`` trades speed for memory the
same way, by default (``auto``) only when memory would otherwise run short.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from depinduce.data.vocab import Vocab
from depinduce.models.base import Induces, ParseScores
from depinduce.models.contracts import MaskedLMBackend
from depinduce.models.layers.dropout import apply_dropout
from depinduce.models.layers.kernels import autocast_off, on_cpu_route
from depinduce.models.layers.memory import limit_onednn_primitive_cache, release_free_heap, should_recompute
from depinduce.models.neural import LinearOutputLayer
from depinduce.models.structformer.attention import StructFormerLayer
from depinduce.models.structformer.config import StructFormerConfig
from depinduce.models.structformer.decoders import OWN_DECODERS, SHARED_FORMS
from depinduce.models.structformer.parent import parent_distribution
from depinduce.models.structformer.parser import SyntacticParser, calibrate_distances

# log(0) replacement in the head-score matrix: the log of float32's smallest normal number (≈ −87.3).
_LOG_FLOOR = torch.finfo(torch.float32).tiny
# The floor of log(1 − r) in the ROOT score (r = 1 to float64 otherwise gives +inf): ROOT then has all but
# e^-700 of the row's mass.
_LOG_ODDS_FLOOR = -700.0


@dataclass
class Structure:
    """The parser's view of a padded batch: calibrated ``distance`` and ``height`` (B, T), the parent
    distribution ``parent`` (B, T, T) and each word's ``root`` probability (B, T)."""

    distance: torch.Tensor
    height: torch.Tensor
    parent: torch.Tensor
    root: torch.Tensor


def sentence_root_scores(word_scores: torch.Tensor, height: torch.Tensor,
                         head_sharpness: torch.Tensor) -> torch.Tensor:
    """ROOT scores (n,) for one sentence's log parent scores ``word_scores`` (n×n, diagonal −inf) such that each
    row's softmax over [ROOT, words] is r_i for ROOT and (1 − r_i) P[i, j] / Σ_k P[i, k] for word j.

    r = softmax(s1 · height) is the model's own distribution over the head of the whole sentence (the head
    choice p_head its parent distribution makes in every span, at the span that is the sentence): its most
    probable word is the highest one, which the authors' decoder makes the root.  Given a head, a word's parent
    is distributed as the authors' P, renormalised over the other words.  P's removed diagonal mass, the
    probability that a word heads its own smallest constituent, is not its probability of being the root:
    taken as ROOT's column it was the largest entry of nearly every row, and no argmax decoder used it.

    The word columns are kept as the authors' log P (``structformer-argmax`` compares them exactly), so ROOT
    carries the row's offset: log r_i − log(1 − r_i) + log Σ_k P[i, k], in float64, returned in the scores'
    dtype.  A one-word sentence's only head is ROOT (score 0)."""
    n = height.numel()
    if n <= 1:
        return word_scores.new_zeros(n)
    log_root = torch.log_softmax(head_sharpness.double() * height.detach().double(), dim=0)
    others = ~torch.eye(n, dtype=torch.bool, device=height.device)
    # log(1 − r_i) as the log-sum of the other words' r, exact when r_i is close to 1; floored so that a word
    # with r_i = 1 to float64 keeps a finite (very large) ROOT score
    log_not_root = log_root[None, :].expand(n, n).masked_fill(~others, float("-inf")).logsumexp(dim=-1)
    log_not_root = log_not_root.clamp_min(_LOG_ODDS_FLOOR)
    log_parent_mass = word_scores.detach().double().logsumexp(dim=-1)
    return (log_root - log_not_root + log_parent_mass).to(word_scores.dtype)


class StructFormer(LinearOutputLayer, MaskedLMBackend):
    """Transformer + distance/height parser trained end to end by masked-LM; gives dependencies and
    constituents."""

    name = "structformer"
    description = "StructFormer (Shen et al. 2021): masked-LM transformer with dependency-constrained attention"
    induces = Induces(dependency=True, constituency=True)
    head_probs = "scores"  # P renormalised under the sentence-head probability r in column 0 (score_tensors)
    default_recipes = {"cpu": "structformer-ptb-cpu", "cuda": "structformer-ptb"}
    config_class = StructFormerConfig
    parser_modules = ("parser",)  # what train.parser_lr applies to
    mixed_precision = True  # train.precision: bf16 (training/precision.py)
    own_decoders = OWN_DECODERS
    shared_decoder_forms = SHARED_FORMS  # argmax: the highest word is the root, as in the paper

    def __init__(self, config: StructFormerConfig, vocab: Vocab) -> None:
        super().__init__(config, vocab)
        limit_onednn_primitive_cache()  # see layers/memory.py: one cached primitive per batch shape fragments the heap
        hidden = config.hidden_size
        self.embedding = nn.Embedding(len(vocab), hidden)
        self.position = nn.Embedding(config.max_positions, hidden) if config.pos_emb else None
        self.parser = SyntacticParser(hidden, config.n_parser_layers, config.conv_size)
        # log s0 (constituent boundaries) and log s1 (head choice within a constituent), both starting at 1.
        self.log_sharpness = nn.Parameter(torch.zeros(2))
        # ρ: per layer and head, the logits of (parent, dependent) relation weights.
        self.relation_logits = nn.Parameter(torch.randn(config.n_layers, config.n_heads, 2) * 0.1)
        self.layers = nn.ModuleList(
            StructFormerLayer(hidden, config.n_heads, config.ff_size, config.dropout, config.dropatt,
                              config.leaky_slope)
            for _ in range(config.n_layers)
        )
        self.final_norm = nn.LayerNorm(hidden)
        self.output_bias = nn.Parameter(torch.zeros(len(vocab)))
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        if self.position is not None:
            nn.init.uniform_(self.position.weight, -0.1, 0.1)

    def structure(self, tokens: torch.Tensor, mask: torch.Tensor, embedded: torch.Tensor | None = None,
                  batch_margin: bool = False) -> Structure:
        """Distances, heights and the parent distribution for a padded batch; ``batch_margin`` calibrates the
        distances with the batch's largest margin instead of each sentence's own."""
        if embedded is None:
            embedded = self.embedding(tokens)
        distance, height = self.parser(embedded, mask)
        # In float32 even under autocast (precision: bf16): the parent distribution multiplies and accumulates
        # probabilities over spans, which bfloat16's 8-bit mantissa would round away.  A float64 model stays
        # float64 (the authors' function to round-off, scripts/check_authors.py).
        with autocast_off(distance):
            dtype = torch.promote_types(distance.dtype, torch.float32)
            distance, height = distance.to(dtype), height.to(dtype)
            distance = calibrate_distances(distance, height, mask, per_batch=batch_margin)
            sharpness = self.log_sharpness.exp()
            parent, root = parent_distribution(distance, height, mask, sharpness[0], sharpness[1])
        return Structure(distance=distance, height=height, parent=parent, root=root)

    def encode(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self._encode(tokens, mask)

    def encode_masked(self, tokens: torch.Tensor, mask: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        """``encode(tokens, mask)[masked]`` with the last layer's position-wise work (its attention output
        projection and feed-forward block, about 0.7 of the layer) done at the masked positions only: a quarter
        of a 4-layer network's per-position products at 30% masking.  Same dropout masks at those positions
        (drawn on CPU; on other devices dropout in training takes the whole-batch path)."""
        if self.training and self.config.dropout > 0.0 and not on_cpu_route(tokens):
            return self._encode(tokens, mask)[masked]
        return self._encode(tokens, mask, masked)

    def _encode(self, tokens: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Hidden states (B, T, H), or (N, H) at the positions ``rows`` selects."""
        if self.training and tokens.device.type == "cpu" and torch.is_grad_enabled():
            # A training step starts here, after the previous one freed its activations and gradients: the
            # moment to hand fragmented heap pages back (layers/memory.py; acts only when the resident set has grown).
            release_free_heap()
        embedded = self.embedding(tokens)
        parent = self.structure(tokens, mask, embedded, batch_margin=self.config.margin == "batch").parent
        x = embedded
        if self.position is not None:
            positions = torch.arange(tokens.size(1), device=tokens.device).clamp_(max=self.config.max_positions - 1)
            x = x + self.position(positions)
        mixtures = self.relation_logits.softmax(dim=-1)
        recompute = self._recompute_ffn(x)
        last = len(self.layers) - 1
        for index, (layer, mixture) in enumerate(zip(self.layers, mixtures)):
            x = layer(x, parent, mixture, recompute, rows if index == last else None)
        return self.final_norm(x if rows is None else x[0])

    def _recompute_ffn(self, x: torch.Tensor) -> bool:
        """Whether this step's feed-forward blocks recompute their inner activation in backward (config
        ``recompute_ffn``; ``auto``: only when keeping all layers' would take a quarter of the available memory)."""
        if not (self.training and torch.is_grad_enabled()):
            return False
        config = self.config
        kept = x.size(0) * x.size(1) * config.ff_size * x.element_size() * config.n_layers
        return should_recompute(config.recompute_ffn, kept)

    def output_layer(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Dropout, then the output layer tied to the word embedding (with its own bias, as the authors')."""
        return apply_dropout(hidden, self.config.dropout, self.training), self.embedding.weight, self.output_bias

    def score_tensors(self, tokens: torch.Tensor, mask: torch.Tensor) -> list[ParseScores]:
        """Per sentence of n words: ``heads`` (n+1)×(n+1) = log P between words (the authors' values, log 0
        floored at log(float32 tiny) so decoders see finite arc scores) and in column 0 the ROOT score of
        :func:`sentence_root_scores`, the diagonal and row 0 −inf; ``distances`` = the n−1 calibrated distances;
        ``heights`` = the n heights; ``split_ties`` from the config's ``tree_ties``.  Each sentence is calibrated
        by its own margin whatever ``margin`` says: the authors parse one sentence at a time."""
        found = self.structure(tokens, mask)
        split_ties = self.config.tree_ties == "nary"
        head_sharpness = self.log_sharpness.detach()[1].exp()
        scores = []
        for b, n in enumerate(mask.sum(dim=-1).tolist()):
            heads = torch.full((n + 1, n + 1), float("-inf"), dtype=found.parent.dtype, device=tokens.device)
            heads[1:, 1:] = found.parent[b, :n, :n].clamp_min(_LOG_FLOOR).log()
            heads[1:, 1:].fill_diagonal_(float("-inf"))
            heads[1:, 0] = sentence_root_scores(heads[1:, 1:], found.height[b, :n], head_sharpness)
            scores.append(
                ParseScores(heads=heads, distances=found.distance[b, : max(n - 1, 0)], heights=found.height[b, :n],
                            split_ties=split_ties)
            )
        return scores

