"""Which head channel learned which relation: per-channel parsing accuracy of a backend with several head
channels (the Probabilistic Transformer), for ``depinduce analyze channels``.

Each channel's heads — and their average, the default parse — are decoded and scored exactly as ``depinduce
parse --channel K`` followed by ``depinduce eval`` would: the sentences go through the shared parse pipeline
(:func:`depinduce.pipeline.parse`: punctuation hidden from the model, the chosen decoder, punctuation re-attached)
and are scored by :func:`depinduce.metrics.evaluate` (punctuation removed by the gold file's rule, re-attachment
of words whose gold head was punctuation).  The model runs once per batch for all channels
(``channel_parse_scores``); only decoding and scoring are repeated per channel.

On a labelled gold file the report also breaks directed accuracy down by gold label (on its universal part,
``nsubj:pass`` → ``nsubj``): for each label, the share of its words whose decoded head in a channel is the gold
head.  The channel with the highest share is the one that models that relation best.  Choose a channel for
``parse --channel`` on dev data; choosing on test data reports an optimistic number.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depinduce.data.punct import sentence_punct_mask
from depinduce.structures.sentence import Sentence
from depinduce.errors import InputError, ModelError
from depinduce.metrics.dependency import DependencyCounts, ratio, universal_label
from depinduce.metrics.evaluate import evaluate
from depinduce.models.base import Backend, ParseScores
from depinduce.pipeline import ParseRequest, parse
from depinduce.structures.dependency import reattach

AVERAGE = "average"
_MISSING_LABELS = ("", "_")


@dataclass
class ChannelReport:
    """Scores of every channel and of the channels' average over one gold file.

    ``views``: the channel numbers 1..C, then :data:`AVERAGE`; ``counts[v]``: the dependency counters of view v;
    ``labels`` (most frequent first) with ``label_words[l]`` gold words each and ``correct[l][v]`` of them
    attached to their gold head by view v (empty when the gold file has no labels).
    """

    decoder: str
    views: list[int | str]
    counts: list[DependencyCounts]
    labels: list[str]
    label_words: list[int]
    correct: list[list[int]]

    @property
    def channels(self) -> list[int]:
        return [v for v in self.views if isinstance(v, int)]

    def accuracy(self, label_row: int, view: int) -> float | None:
        """Percentage of the label's words that view ``view`` (an index into ``views``) attaches correctly."""
        return ratio(self.correct[label_row][view], self.label_words[label_row])

    def best_channel(self, label_row: int) -> tuple[int | None, float | None]:
        """The channel (1-based) with the most correctly attached words of a label (ties go to the lowest) and
        its accuracy; (None, 0.0) when no channel attaches any of them correctly."""
        scores = self.correct[label_row][: len(self.channels)]
        best = max(range(len(scores)), key=lambda v: (scores[v], -v))
        if scores[best] == 0:
            return None, self.accuracy(label_row, best)
        return self.channels[best], self.accuracy(label_row, best)

    def best_overall(self) -> int:
        """The channel with the highest DDA (ties: the lowest channel)."""
        dda = [c.directed for c in self.counts[: len(self.channels)]]
        return self.channels[max(range(len(dda)), key=lambda v: (dda[v], -v))]

    def to_dict(self) -> dict[str, object]:
        rows = []
        for view, counts in zip(self.views, self.counts):
            rows.append({"channel": view, "dda": counts.dda, "uda": counts.uda,
                         "root_accuracy": counts.root_accuracy, "well_formed": counts.well_formed_share,
                         "directed": counts.directed, "undirected": counts.undirected, "tokens": counts.tokens,
                         "sentences": counts.sentences})
        labels = []
        for row, label in enumerate(self.labels):
            channel, best = self.best_channel(row)
            labels.append({"label": label, "words": self.label_words[row], "best_channel": channel,
                           "best_accuracy": best,
                           "accuracy": {str(v): self.accuracy(row, k) for k, v in enumerate(self.views)},
                           "correct": {str(v): self.correct[row][k] for k, v in enumerate(self.views)}})
        return {"decoder": self.decoder, "best_channel": self.best_overall(), "channels": rows, "labels": labels}


class _ChannelScores:
    """Runs the model once per parse batch and keeps every view's scores, so that each channel's pass through
    the parse pipeline replays them instead of running the model again."""

    def __init__(self, model: Any, progress: Callable[[int], None] | None) -> None:
        self.model = model
        self.progress = progress
        self.batches: list[tuple[list[tuple[str, ...]], list[list[ParseScores]]]] = []

    def fetch(self, call: int, sentences: Sequence[Sequence[str]]) -> list[list[ParseScores]]:
        words = [tuple(s) for s in sentences]
        if call == len(self.batches):
            self.batches.append((words, self.model.channel_parse_scores(sentences)))
            if self.progress is not None:
                self.progress(len(sentences))
        stored_words, scores = self.batches[call]
        if stored_words != words:  # the pipeline is deterministic; this guards the replay's assumption
            raise ModelError("analyze channels: the parse pipeline asked for different sentences on replay")
        return scores


class _OneView(Backend):
    """The model seen through one view (a channel, or the average) of the stored scores."""

    def __init__(self, model: Backend, store: _ChannelScores, view: int) -> None:
        self.name = model.name  # type: ignore[misc]
        self.capabilities = model.capabilities  # type: ignore[misc]
        self.store = store
        self.view = view
        self.calls = 0

    @classmethod
    def load(cls, run_dir: Path | None, *, device: str = "cpu", seed: int = 0) -> Backend:
        raise ModelError("a channel view is built by analyze channels, not loaded")

    def parse_scores(self, sentences: Sequence[Sequence[str]]) -> list[ParseScores]:
        scores = self.store.fetch(self.calls, sentences)
        self.calls += 1
        return [views[self.view] for views in scores]


def has_channels(model: Any) -> bool:
    """Whether ``model`` offers per-channel head scores (``channel_parse_scores`` and ``n_channels``)."""
    return callable(getattr(model, "channel_parse_scores", None)) and isinstance(getattr(model, "n_channels", None),
                                                                                int)


def analyze_channels(model: Any, gold: Sequence[Sentence], *, decoder: str = "mst", batch_size: int = 32,
                     gold_path: str = "gold", progress: Callable[[int], None] | None = None) -> ChannelReport:
    """Score every channel of ``model`` and their average against ``gold`` (sentences with gold heads).

    ``progress`` is called with the number of sentences the model has just scored."""
    if not has_channels(model):
        raise ModelError(f"model '{getattr(model, 'name', type(model).__name__)}' has no head channels to "
                         "analyse; analyze channels needs a backend with several head channels (probformer)")
    if not gold or any(s.heads is None for s in gold if s.words):
        raise InputError(gold_path, None, "analyze channels needs gold heads on every sentence")
    store = _ChannelScores(model, progress)
    views: list[int | str] = [*range(1, model.n_channels + 1), AVERAGE]
    request = ParseRequest(fmt="conllu", decoder=decoder, batch_size=batch_size, source=gold_path)
    counts: list[DependencyCounts] = []
    predictions: list[list[Sentence]] = []
    for index in range(len(views)):
        copies = [dataclasses.replace(s, heads=None, deprels=None, tree=None) for s in gold]
        predicted = list(parse(copies, _OneView(model, store, index), request, progress=False))
        result = evaluate(gold, predicted, gold_path=gold_path, pred_path=f"channel {views[index]}")
        assert result.overall.dependency is not None  # gold and prediction both carry heads
        counts.append(result.overall.dependency)
        predictions.append(predicted)
    labels, words, correct = _label_accuracy(gold, predictions)
    return ChannelReport(decoder=decoder, views=views, counts=counts, labels=labels, label_words=words,
                         correct=correct)


def _label_accuracy(gold: Sequence[Sentence],
                    predictions: Sequence[Sequence[Sentence]]) -> tuple[list[str], list[int], list[list[int]]]:
    """Per gold label: its number of scored words and, per view, how many of them got their gold head.

    Words are the ones ``evaluate`` scores (punctuation removed by the gold file's rule, heads re-attached to
    the nearest kept ancestor on both sides)."""
    if not any(s.deprels and any(label not in _MISSING_LABELS for label in s.deprels) for s in gold):
        return [], [], []
    totals: Counter[str] = Counter()
    hits: list[Counter[str]] = [Counter() for _ in predictions]
    for number, sentence in enumerate(gold):
        if not sentence.words or sentence.heads is None or sentence.deprels is None:
            continue
        keep = [not hidden for hidden in sentence_punct_mask(sentence)]
        gold_heads = reattach(sentence.heads, keep)
        labels = [universal_label(label) for label, k in zip(sentence.deprels, keep) if k]
        totals.update(labels)
        for view, predicted in enumerate(predictions):
            pred_heads = predicted[number].heads
            assert pred_heads is not None
            for g, p, label in zip(gold_heads, reattach(pred_heads, keep), labels):
                if g == p:
                    hits[view][label] += 1
    ordered = [label for label, _ in totals.most_common()]
    return ordered, [totals[label] for label in ordered], [[hits[v][label] for v in range(len(predictions))]
                                                         for label in ordered]
