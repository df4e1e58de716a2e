"""Dependency metrics (DDA/UAS, UDA/UUAS, LAS, root accuracy, well-formedness) as exact counts.

Everything here works on *already aligned, already punctuation-stripped* head lists (1-based heads, 0 = ROOT).
Counts are kept as plain ints rather than running averages so that the JSON report carries the numerators and
denominators, sums over length buckets are exact, and scoring 100k tokens stays well under a second.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from depinduce.structures.dependency import tree_problem


def universal_label(label: str) -> str:
    """The universal part of a dependency label (``nsubj:pass`` -> ``nsubj``), as the CoNLL 2018 scorer compares."""
    return label.split(":", 1)[0]


def ratio(numerator: int, denominator: int) -> float | None:
    """Percentage ``100 * numerator / denominator``, or None when nothing was counted."""
    return 100.0 * numerator / denominator if denominator else None


@dataclass
class DependencyCounts:
    """Micro-averaging counters for the dependency metrics over any set of sentences.

    ``labelled_tokens`` counts the tokens for which both sides carry labels (LAS is only defined there);
    ``root_*`` and ``well_formed`` count sentences, every other field counts tokens.
    """

    sentences: int = 0
    tokens: int = 0
    directed: int = 0
    undirected: int = 0
    labelled_tokens: int = 0
    labelled: int = 0
    root_correct: int = 0
    well_formed: int = 0

    def add(self, other: DependencyCounts) -> None:
        """Add another counter's totals to this one (used for corpus and per-bucket sums)."""
        self.sentences += other.sentences
        self.tokens += other.tokens
        self.directed += other.directed
        self.undirected += other.undirected
        self.labelled_tokens += other.labelled_tokens
        self.labelled += other.labelled
        self.root_correct += other.root_correct
        self.well_formed += other.well_formed

    @property
    def dda(self) -> float | None:
        """Directed dependency accuracy (= UAS), percent."""
        return ratio(self.directed, self.tokens)

    @property
    def uda(self) -> float | None:
        """Undirected dependency accuracy (= UUAS), percent."""
        return ratio(self.undirected, self.tokens)

    @property
    def las(self) -> float | None:
        """Labelled attachment score over the tokens labelled on both sides, percent; None when there are none."""
        return ratio(self.labelled, self.labelled_tokens)

    @property
    def root_accuracy(self) -> float | None:
        """Share of sentences whose predicted root word(s) are exactly the gold root word(s), percent."""
        return ratio(self.root_correct, self.sentences)

    @property
    def well_formed_share(self) -> float | None:
        """Share of predicted sentences that are well-formed trees (one root, no cycle), percent."""
        return ratio(self.well_formed, self.sentences)

    def to_dict(self) -> dict[str, object]:
        """JSON form: every metric with its percentage (full precision) and the counts it comes from."""
        out: dict[str, object] = {
            "sentences": self.sentences,
            "tokens": self.tokens,
            "dda": {"correct": self.directed, "total": self.tokens, "percent": self.dda},
            "uda": {"correct": self.undirected, "total": self.tokens, "percent": self.uda},
            "root_accuracy": {"correct": self.root_correct, "total": self.sentences, "percent": self.root_accuracy},
            "well_formed": {"count": self.well_formed, "total": self.sentences, "percent": self.well_formed_share},
        }
        out["las"] = (
            {"correct": self.labelled, "total": self.labelled_tokens, "percent": self.las}
            if self.labelled_tokens
            else None
        )
        return out


def undirected_edges(heads: Sequence[int]) -> set[tuple[int, int]]:
    """Edges {i, h_i} as ordered (low, high) pairs; the root edge of word i is (0, i)."""
    return {(h, i) if h < i else (i, h) for i, h in enumerate(heads, start=1)}


def score_heads(
    gold: Sequence[int],
    pred: Sequence[int],
    *,
    gold_labels: Sequence[str] | None = None,
    pred_labels: Sequence[str] | None = None,
    pred_well_formed: bool | None = None,
) -> DependencyCounts:
    """Counts for one sentence of ``n = len(gold)`` scored tokens.

    ``pred_well_formed`` lets the caller judge well-formedness on the prediction as it was submitted (before
    punctuation removal, which can split one tree into several roots); by default ``pred`` itself is checked.
    Labels are compared only when both lists are given.
    """
    n = len(gold)
    if len(pred) != n:
        raise ValueError(f"{len(pred)} predicted heads for {n} gold heads")
    counts = DependencyCounts(sentences=1, tokens=n)
    directed = 0
    for g, p in zip(gold, pred):
        if g == p:
            directed += 1
    counts.directed = directed
    counts.undirected = len(undirected_edges(gold) & undirected_edges(pred))
    if gold_labels is not None and pred_labels is not None:
        counts.labelled_tokens = n
        counts.labelled = sum(
            1
            for g, p, gl, pl in zip(gold, pred, gold_labels, pred_labels)
            if g == p and universal_label(gl) == universal_label(pl)
        )
    gold_roots = [i for i, h in enumerate(gold) if h == 0]
    pred_roots = [i for i, h in enumerate(pred) if h == 0]
    counts.root_correct = int(gold_roots == pred_roots)
    if pred_well_formed is None:
        pred_well_formed = tree_problem(pred) is None
    counts.well_formed = int(pred_well_formed)
    return counts
