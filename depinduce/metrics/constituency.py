"""Unlabelled bracketing F1 (sentence-level and corpus-level) and per-label recall of gold constituents.

Inputs are span *sets* already restricted to the scored words and already stripped of length-1 spans and the
whole-sentence span (``depinduce.structures.spans.scored_spans``).  Both averages are kept because the
literature mixes them: the same right-branching baseline scores several points apart under the two.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from depinduce.metrics.dependency import ratio


def phrase_label(label: str) -> str:
    """The bare phrase label: function tags and co-indices dropped (``NP-SBJ-1`` -> ``NP``, ``NP=2`` -> ``NP``).

    Labels starting with ``-`` (``-NONE-``, ``-LRB-``) are tags, not phrases, and are returned unchanged.
    """
    if not label or label.startswith("-"):
        return label
    for sep in ("-", "="):
        label = label.split(sep, 1)[0]
    return label


def sentence_f1(pred: set[tuple[int, int]], gold: set[tuple[int, int]]) -> tuple[int, float]:
    """(matched spans, F1 in [0, 1]) of one sentence under the PRPN/StructFormer convention.

    Precision is 1 when the prediction has no spans and recall is 1 when the gold has none, so a sentence whose
    only constituents are excluded (every 2-word sentence) scores 1.
    """
    matched = len(pred & gold)
    precision = matched / len(pred) if pred else 1.0
    recall = matched / len(gold) if gold else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return matched, f1


@dataclass
class SpanCounts:
    """Counters for UF1 over any set of sentences.

    ``f1_sum`` is the sum of per-sentence F1 values (in [0, 1]); ``matched/predicted/gold`` are the span counts
    the corpus-level F1 is computed from.  ``label_found/label_total`` count gold constituents per bare phrase
    label, only for labelled gold trees.
    """

    sentences: int = 0
    f1_sum: float = 0.0
    matched: int = 0
    predicted: int = 0
    gold: int = 0
    label_found: Counter[str] = field(default_factory=Counter)
    label_total: Counter[str] = field(default_factory=Counter)

    def add(self, other: SpanCounts) -> None:
        """Add another counter's totals to this one."""
        self.sentences += other.sentences
        self.f1_sum += other.f1_sum
        self.matched += other.matched
        self.predicted += other.predicted
        self.gold += other.gold
        self.label_found.update(other.label_found)
        self.label_total.update(other.label_total)

    @property
    def sentence_f1(self) -> float | None:
        """Sentence-level UF1: mean of per-sentence F1, percent."""
        return 100.0 * self.f1_sum / self.sentences if self.sentences else None

    @property
    def precision(self) -> float | None:
        """Corpus-level precision, percent (100 when no spans were predicted anywhere, like the sentence rule)."""
        if not self.sentences:
            return None
        return ratio(self.matched, self.predicted) if self.predicted else 100.0

    @property
    def recall(self) -> float | None:
        """Corpus-level recall, percent (100 when the gold has no spans anywhere)."""
        if not self.sentences:
            return None
        return ratio(self.matched, self.gold) if self.gold else 100.0

    @property
    def corpus_f1(self) -> float | None:
        """Corpus-level (micro, EVALB-like) UF1 from the summed span counts, percent."""
        p, r = self.precision, self.recall
        if p is None or r is None:
            return None
        return 2 * p * r / (p + r) if p + r else 0.0

    def labels_by_frequency(self) -> list[str]:
        """Gold phrase labels, most frequent first (ties alphabetical, so reports are stable)."""
        return sorted(self.label_total, key=lambda label: (-self.label_total[label], label))

    def label_recall(self, label: str) -> float | None:
        """Percentage of gold constituents with this label whose span the prediction contains."""
        return ratio(self.label_found[label], self.label_total[label])

    def to_dict(self) -> dict[str, object]:
        """JSON form: both F1 definitions with full precision, the counts, and per-label recall."""
        return {
            "sentences": self.sentences,
            "uf1_sentence": {"f1_sum": self.f1_sum, "total": self.sentences, "percent": self.sentence_f1},
            "uf1_corpus": {
                "matched": self.matched,
                "predicted": self.predicted,
                "gold": self.gold,
                "precision": self.precision,
                "recall": self.recall,
                "percent": self.corpus_f1,
            },
            "label_recall": {
                label: {
                    "found": self.label_found[label],
                    "total": self.label_total[label],
                    "percent": self.label_recall(label),
                }
                for label in self.labels_by_frequency()
            },
        }


def score_spans(
    gold: set[tuple[int, int]],
    pred: set[tuple[int, int]],
    *,
    gold_labelled: Iterable[tuple[str, int, int]] | None = None,
) -> SpanCounts:
    """Counts for one sentence from its scored gold and predicted span sets.

    ``gold_labelled`` are the gold's labelled constituents over the scored words; only those whose span is in
    ``gold`` (so not length-1, not the whole sentence) count.  Each distinct (bare label, start, end) counts once
    toward that label's recall, so a unary chain S -> VP over the same words contributes one S and one VP.
    """
    matched, f1 = sentence_f1(pred, gold)
    counts = SpanCounts(sentences=1, f1_sum=f1, matched=matched, predicted=len(pred), gold=len(gold))
    if gold_labelled is not None:
        for label, a, b in {(phrase_label(label), a, b) for label, a, b in gold_labelled}:
            if not label or (a, b) not in gold:
                continue
            counts.label_total[label] += 1
            if (a, b) in pred:
                counts.label_found[label] += 1
    return counts
