"""The DMV (Klein & Manning 2004) as a depinduce backend: probability tables, EM statistics and parsing.

Parameters (log-probability tables over the classes of the token view, see :class:`~.config.DMVConfig`):
``root[c]`` = P(the root word has class c); ``attach[h, d, a]`` = P(a | head h, direction d) with d = 0 left,
1 right; ``stop[h, d, v, s]`` = P(s | h, d, v) with s = 0 stop, 1 continue and v = 1 when h already has a
dependent on side d.  A tree's probability is root · Π over heads and sides of the continue/attach events of its
dependents (inside out) and one final stop — so the DMV is a generative model of tag sequences and trees: the
trees of one fixed sentence do *not* sum to 1 (the sentence's own probability, Z, is what they sum to).

Expected counts come from autograd: log Z is linear in each tree's event counts, so d log Z / d log θ is the
posterior expected count of every event (inside-outside) — :meth:`DMV.expected_counts`.  Parsing gives, per
sentence, ``heads`` = log posterior arc marginals (so every shared decoder — mst, eisner, argmax — decodes
minimum-risk-style trees) and the model's Viterbi tree for the own decoder ``dmv-viterbi`` (the paper's parses);
each costs a chart pass and its backward, so each is computed only when read (:class:`BatchCharts`).

Token view at parse time: ``upos``/``xpos`` need CoNLL-U input with that column (text input is a one-line
error); ``words`` reads any input.  Punctuation is hidden by the shared parse pipeline, exactly as in training.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import ClassVar

import torch

from depinduce.data.normalize import Normalization
from depinduce.data.vocab import Vocab
from depinduce.errors import UsageError
from depinduce.io.initial_graphs import InitialGraph
from depinduce.models.base import Induces, OwnDecoder, ParseScores, described_decoders
from depinduce.models.contracts import EMBackend
from depinduce.models.dmv.chart import Semiring, SentenceScores, inside
from depinduce.models.dmv.config import DMVConfig
from depinduce.models.dmv.decoder_info import DECODERS
from depinduce.models.neural import pad_batch
from depinduce.models.views import TaggedWords
from depinduce.structures.sentence import Sentence

LEFT, RIGHT = 0, 1
STOP, CONTINUE = 0, 1
TABLES = ("root", "attach", "stop")


class BatchCharts:
    """One parse batch's two chart gradients, each computed on first request and once: the arc marginals (log
    semiring, read by mst/eisner/argmax and ``--probs``) and the Viterbi tree (max semiring, read by
    ``dmv-viterbi``).  Each costs an inside pass and its backward, so a decoder pays only for what it reads."""

    def __init__(self, model: "DMV", classes: torch.Tensor, lengths: torch.Tensor) -> None:
        # the tables as they are now: a later M-step does not change this batch's parse
        self._model, self._tables = model, {name: t.detach().clone() for name, t in model.tables().items()}
        self._classes, self._lengths = classes, lengths
        self._by_semiring: dict[str, torch.Tensor] = {}

    def gradients(self, semiring: Semiring) -> torch.Tensor:
        if semiring not in self._by_semiring:
            self._by_semiring[semiring] = self._model.chart_gradients(self._classes, self._lengths, semiring,
                                                                      self._tables)
        return self._by_semiring[semiring]

    def marginal_scores(self, b: int, n: int) -> torch.Tensor:
        """Sentence ``b``'s (n+1)×(n+1) log arc marginals, row 0 unused (-inf)."""
        heads = torch.full((n + 1, n + 1), float("-inf"))
        heads[1:] = self.gradients("log")[b, :n, : n + 1].clamp_min(0).log().cpu()
        return heads

    def viterbi_heads(self, b: int, n: int) -> list[int]:
        """Sentence ``b``'s Viterbi tree: n heads, 0 = ROOT."""
        return self.gradients("max")[b, :n, : n + 1].argmax(-1).tolist()


class DMVParseScores(ParseScores):
    """ParseScores whose ``heads`` (arc log-marginals) and ``viterbi_heads`` (the DMV's Viterbi tree, n heads,
    0 = ROOT, read by ``dmv-viterbi``) are computed from the batch's charts when first read."""

    def __init__(self, charts: BatchCharts, b: int, n: int) -> None:
        super().__init__()  # heads=None through the setter: not computed yet
        self._charts, self._b, self._n = charts, b, n

    @property  # type: ignore[override]
    def heads(self) -> torch.Tensor | None:
        if self._heads is None:
            self._heads = self._charts.marginal_scores(self._b, self._n)
        return self._heads

    @heads.setter
    def heads(self, value: torch.Tensor | None) -> None:
        self._heads = value

    @functools.cached_property
    def viterbi_heads(self) -> list[int]:
        return self._charts.viterbi_heads(self._b, self._n)


def _viterbi(scores: ParseScores) -> list[int]:
    if not isinstance(scores, DMVParseScores):
        raise UsageError("the dmv-viterbi decoder reads the DMV's own parse; it applies to model 'dmv' only")
    return list(scores.viterbi_heads)


def build_class_vocab(sentences: Sequence[Sentence], config: DMVConfig, normalization: Normalization) -> Vocab:
    """The classes of the token view, from the training sentences: every tag, or the ``max_words`` most frequent
    normalised words (the rest map to ``<unk>``)."""
    if config.view == "words":
        return Vocab.build((normalization.words(s.words) for s in sentences), min_freq=1,
                           max_vocab=config.max_words, normalization=normalization)
    tags = [_tags(s, config.view) for s in sentences]
    return Vocab.build(tags, min_freq=1, normalization=Normalization(lowercase=False, fold_digits=False))


def _tags(sentence: Sentence, view: str) -> list[str]:
    """The sentence's UPOS or XPOS column; a missing column is a one-line error naming the sentence."""
    tags = sentence.upos if view == "upos" else sentence.xpos
    if tags is None or any(tag in ("_", "") for tag in tags):
        where = (f"sentence {sentence.sent_id}" if sentence.sent_id
                 else f"the sentence at line {sentence.line}" if sentence.line else "a sentence")
        raise UsageError(f"{where} has no {view.upper()}: model 'dmv' with view {view} reads {view.upper()} tags "
                         "from CoNLL-U input (--input-format conllu); view=words reads plain text")
    return list(tags)


class DMV(EMBackend):
    """Dependency Model with Valence over a token view (gold tags or frequent words), trained by EM."""

    name = "dmv"
    description = ("DMV (Klein & Manning 2004): generative dependency model with valence over gold tags or frequent "
                   "words, EM from the harmonic initialiser; reads tags from CoNLL-U")
    # objective "em": ``depinduce train`` runs :class:`depinduce.training.em.EMLoop`, not gradient steps
    head_probs = "scores"  # the arc marginals of its inside-outside (score_tensors)
    induces = Induces(dependency=True, constituency=False)
    input_view = TaggedWords()  # the visible tokens with their tags (parse_sentences)
    default_recipes = {"cpu": "dmv-ptb-cpu", "cuda": "dmv-ptb-cpu"}
    default_decoder = "dmv-viterbi"
    config_class = DMVConfig
    own_decoders: ClassVar[dict[str, OwnDecoder]] = described_decoders(DECODERS, {"dmv-viterbi": _viterbi},
                                                                        without_heads={"dmv-viterbi"})

    def __init__(self, config: DMVConfig, vocab: Vocab) -> None:
        super().__init__(config, vocab)
        n = len(vocab)
        # log-probability tables, set by EM's M-step (never by an optimiser); uniform until then
        self.root = torch.nn.Parameter(torch.zeros(n), requires_grad=False)
        self.attach = torch.nn.Parameter(torch.zeros(n, 2, n), requires_grad=False)
        self.stop = torch.nn.Parameter(torch.zeros(n, 2, 2, 2), requires_grad=False)
        self.set_counts({name: torch.ones_like(getattr(self, name)) for name in TABLES})

    # ------------------------------------------------------------------- EM hooks (depinduce.training.em)

    @classmethod
    def build_vocab(cls, sentences: Sequence[Sentence], config: DMVConfig, normalization: Normalization) -> Vocab:
        """The class inventory of the token view, from the training sentences."""
        return build_class_vocab(sentences, config, normalization)

    @staticmethod
    def tag_column(config: DMVConfig) -> str | None:
        """The CoNLL-U column the token view reads (``upos``/``xpos``), None for words."""
        return None if config.view == "words" else config.view

    def initial_counts(self, rows: Sequence[Sequence[int]]) -> dict[str, torch.Tensor]:
        """EM's first pseudo-counts: Klein & Manning's harmonic initialiser (:meth:`harmonic_counts`)."""
        return self.harmonic_counts(rows)

    # ------------------------------------------------------------------------------------------- tables

    def tables(self) -> dict[str, torch.Tensor]:
        return {name: getattr(self, name) for name in TABLES}

    def set_counts(self, counts: dict[str, torch.Tensor]) -> None:
        """M-step: each table = log of its (smoothed) counts normalised over the generated outcome."""
        eps = self.config.smoothing
        with torch.no_grad():
            self.root.copy_(torch.log_softmax((counts["root"] + eps).log(), dim=-1))
            self.attach.copy_(torch.log_softmax((counts["attach"] + eps).log(), dim=-1))
            self.stop.copy_(torch.log_softmax((counts["stop"] + eps).log(), dim=-1))

    def classes(self, sentences: Sequence[Sentence]) -> list[list[int]]:
        """Class indices of each sentence's tokens in the configured view."""
        if self.config.view == "words":
            return [self.vocab.encode(s.words) for s in sentences]
        return [self.vocab.encode(_tags(s, self.config.view), normalize=False) for s in sentences]

    def sentence_scores(self, classes: torch.Tensor, lengths: torch.Tensor,
                        tables: dict[str, torch.Tensor] | None = None) -> SentenceScores:
        """The chart's per-sentence scores gathered from the tables (gradients flow back into ``tables``)."""
        t = tables or self.tables()
        root, attach, stop = t["root"], t["attach"], t["stop"]
        heads, deps = classes.unsqueeze(2), classes.unsqueeze(1)  # (B, N, 1), (B, 1, N)
        attach_r = attach[:, RIGHT][heads, deps].permute(1, 2, 0)  # [i, j]: head i, dependent j
        attach_l = attach[:, LEFT][deps, heads].permute(1, 2, 0)  # [i, j]: head j, dependent i
        per_word = stop[classes]  # (B, N, dir, v, s)
        order = [(RIGHT, 0), (RIGHT, 1), (LEFT, 0), (LEFT, 1)]
        stops = torch.stack([per_word[:, :, d, v, STOP].t() for d, v in order])
        conts = torch.stack([per_word[:, :, d, v, CONTINUE].t() for d, v in order])
        return SentenceScores(attach_r, attach_l, stops, conts, root[classes].t(), lengths)

    def batch_tensors(self, rows: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, N) class indices (padding = class 0, harmless) and (B,) lengths."""
        tokens, mask = pad_batch(rows, self.vocab.pad_index)
        return tokens.to(self.device), mask.sum(-1).to(self.device)

    # ---------------------------------------------------------------------------------------------- EM

    def log_partition(self, rows: Sequence[Sequence[int]]) -> torch.Tensor:
        """log P(sentence) of each row of class indices, shape (B,)."""
        classes, lengths = self.batch_tensors(rows)
        with torch.no_grad():
            return inside(self.sentence_scores(classes, lengths))

    def expected_counts(self, rows: Sequence[Sequence[int]]) -> tuple[float, dict[str, torch.Tensor]]:
        """Σ log P(sentence) over ``rows`` and the posterior expected count of every event (d log Z / d log θ)."""
        classes, lengths = self.batch_tensors(rows)
        leaves = {name: table.detach().clone().requires_grad_() for name, table in self.tables().items()}
        with torch.enable_grad():
            log_z = inside(self.sentence_scores(classes, lengths, leaves)).sum()
            grads = torch.autograd.grad(log_z, [leaves[name] for name in TABLES])
        return float(log_z.detach()), dict(zip(TABLES, grads))

    def harmonic_counts(self, rows: Sequence[Sequence[int]]) -> dict[str, torch.Tensor]:
        """Klein & Manning's harmonic initialiser as pseudo-counts (an initial E-step, not initial parameters).

        Per sentence of n words: each word is the root with posterior 1/n; otherwise it attaches to each other
        word h with posterior ∝ 1/|h − d| (the remaining 1 − 1/n shared out harmonically).  Stop/continue counts
        follow from those posteriors: with E = the expected number of dependents of h on one side, the first
        dependent is taken (continue at valence 0) with count min(1, E), further ones (continue at valence 1) with
        E − min(1, E), and the side is closed once — at valence 0 with 1 − min(1, E), at valence 1 with
        min(1, E).  The M-step then turns these counts into the initial model."""
        counts = {name: torch.zeros_like(table) for name, table in self.tables().items()}
        for row in rows:
            n = len(row)
            c = torch.as_tensor(row, dtype=torch.long, device=self.device)
            like = counts["root"]
            counts["root"].index_put_((c,), like.new_full((n,), 1.0 / n), accumulate=True)
            pos = torch.arange(n, device=self.device, dtype=like.dtype)
            distance = (pos.unsqueeze(0) - pos.unsqueeze(1)).abs()  # [h, d]
            weight = torch.where(distance > 0, 1.0 / distance.clamp_min(1), torch.zeros_like(distance))
            if n > 1:
                weight = weight / weight.sum(0, keepdim=True) * (1.0 - 1.0 / n)  # over heads h, per dependent d
            right = torch.triu(torch.ones(n, n, dtype=torch.bool, device=self.device), 1)  # h < d
            heads, deps = c.unsqueeze(1).expand(n, n), c.unsqueeze(0).expand(n, n)
            for direction, side in ((RIGHT, right), (LEFT, right.t())):
                w = weight * side
                counts["attach"][:, direction].index_put_((heads.reshape(-1), deps.reshape(-1)), w.reshape(-1),
                                                          accumulate=True)
                expected = w.sum(1)  # per head
                first = expected.clamp(max=1.0)
                stop = counts["stop"][:, direction]
                stop[:, 0, CONTINUE].index_put_((c,), first, accumulate=True)
                stop[:, 0, STOP].index_put_((c,), 1.0 - first, accumulate=True)
                stop[:, 1, CONTINUE].index_put_((c,), expected - first, accumulate=True)
                stop[:, 1, STOP].index_put_((c,), first, accumulate=True)
        return counts

    # ------------------------------------------------------------------------------------------ parsing

    def score_tensors(self, tokens: torch.Tensor, mask: torch.Tensor) -> list[ParseScores]:
        """``tokens`` are class indices (B, T): arc log-marginals and the Viterbi tree of each sentence, each
        computed for the whole batch when a sentence's first is read (:class:`BatchCharts`)."""
        lengths = mask.sum(-1)
        charts = BatchCharts(self, tokens, lengths)
        return [DMVParseScores(charts, b, n) for b, n in enumerate(lengths.tolist())]

    def chart_gradients(self, classes: torch.Tensor, lengths: torch.Tensor, semiring: Semiring,
                        tables: dict[str, torch.Tensor]) -> torch.Tensor:
        """(B, N, N+1) [dependent, head] arc marginals (log semiring) or best-tree indicators (max semiring):
        the gradient of the inside total with respect to each arc's score; column 0 = ROOT."""
        with torch.inference_mode(False), torch.enable_grad():
            scores = self.sentence_scores(classes.clone(), lengths.clone(),
                                          {name: t.clone() for name, t in tables.items()})
            attach_r = scores.attach_r.detach().clone().requires_grad_()
            attach_l = scores.attach_l.detach().clone().requires_grad_()
            root = scores.root.detach().clone().requires_grad_()
            scores = dataclasses.replace(scores, attach_r=attach_r, attach_l=attach_l, root=root,
                                         stop=scores.stop.detach().clone(), cont=scores.cont.detach().clone())
            total = inside(scores, semiring).sum()  # type: ignore[arg-type]
            # a batch of one-word sentences has no arc between words: their attach scores take no part (allowed,
            # and their gradient is 0), where autograd would refuse them
            wrt = [attach_r, attach_l, root]
            g_right, g_left, g_root = (torch.zeros_like(t) if g is None else g for t, g in
                                       zip(wrt, torch.autograd.grad(total, wrt, allow_unused=True)))
        n_words, batch = root.shape
        out = root.new_zeros(batch, n_words, n_words + 1)
        # [dependent, head]: right arcs are stored [head, dependent], left arcs [dependent, head]
        arcs = torch.where(torch.triu(torch.ones(n_words, n_words, dtype=torch.bool, device=root.device), 1).t(),
                           g_right.permute(2, 1, 0), g_left.permute(2, 0, 1))
        out[:, :, 1:] = arcs
        out[:, :, 0] = g_root.t()
        return out

    def parse_sentences(self, sentences: Sequence[Sentence],
                        init: Sequence[InitialGraph | None] | None = None) -> list[ParseScores]:
        """The visible (punctuation-free) tokens of each sentence with their tags (the pipeline hides the rest)."""
        rows = self.classes(sentences)
        tokens, mask = pad_batch(rows, self.vocab.pad_index)
        was_training = self.training
        self.eval()
        try:
            return self.score_tensors(tokens.to(self.device), mask.to(self.device))
        finally:
            self.train(was_training)

    def parse_scores(self, sentences: Sequence[Sequence[str]]) -> list[ParseScores]:
        return self.parse_sentences([Sentence(words=list(words)) for words in sentences])
