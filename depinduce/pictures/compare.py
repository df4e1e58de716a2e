"""A predicted sentence against its gold, as ``eval`` pairs and scores them: which heads, labels and constituents
are wrong and which gold spans are missing (:class:`Marks`), what the pictures colour and the terminal view marks
``✗``; and :func:`load_pictures`, what ``depinduce show`` reads and compares before drawing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from nltk import Tree

from depinduce.data.punct import sentence_punct_mask
from depinduce.errors import UsageError
from depinduce.io import read_sentences
from depinduce.io.lines import display_name
from depinduce.metrics.dependency import universal_label
from depinduce.metrics.evaluate import Alignment, align
from depinduce.structures.sentence import Sentence
from depinduce.structures.spans import labelled_spans

# Labels an unlabelled parse writes: comparing them with gold labels says nothing.
_UNLABELLED = frozenset({"root", "dep", "punct", "_", ""})


@dataclass
class Marks:
    """What differs between a predicted sentence and its gold: drives the colours (pictures) and ``✗`` (text)."""

    gold_heads: list[int] | None = None  # per predicted token: its gold head, in the prediction's positions
    gold_deprels: list[str] | None = None
    scored: int = 0  # the words ``eval`` scores (punctuation left out)
    unscored: set[int] = field(default_factory=set)  # 1-based predicted tokens ``eval`` leaves out
    wrong_heads: set[int] = field(default_factory=set)  # 1-based dependents whose head is wrong
    wrong_labels: set[int] = field(default_factory=set)  # right head, wrong label
    wrong_spans: set[tuple[int, int]] = field(default_factory=set)  # predicted constituents not in the gold
    missing_spans: list[tuple[str, int, int]] = field(default_factory=list)  # gold constituents not predicted


def _spans(tree: Tree) -> dict[tuple[int, int], str]:
    """Constituents of more than one word, unlabelled, each with its (first) label."""
    spans: dict[tuple[int, int], str] = {}
    for label, a, b in labelled_spans(tree):
        if b - a > 1:
            spans.setdefault((a, b), label)
    return spans


def compare(pred: Sentence, gold: Sentence, pair: Alignment | None = None) -> Marks:
    """The differences of ``pred`` from ``gold`` over the tokens ``eval`` scores: punctuation (the gold's rule) is
    never wrong, and a word whose head was punctuation is judged after re-attachment, as DDA judges it.

    ``pair``: the two sentences' alignment from :func:`depinduce.metrics.evaluate.align` (computed here when not
    given), so a prediction with punctuation the gold lacks is compared too."""
    if pair is None:
        pair = align([gold], [pred])[0]
    positions = [i for i, kept in enumerate(pair.pred_keep, start=1) if kept]  # each scored word's position

    def placed(head: int) -> int:
        return positions[head - 1] if head else 0

    marks = Marks(scored=len(positions), unscored={i for i, kept in enumerate(pair.pred_keep, start=1) if not kept})
    if pred.heads is not None and gold.heads is not None:
        gold_heads, pred_heads = pair.heads(gold, pred)
        gold_labels = [label for label, kept in zip(gold.deprels or [], pair.gold_keep) if kept]
        pred_labels = pred.deprels or []
        marks.gold_heads = list(pred.heads)
        marks.gold_deprels = list(pred_labels) if pred.deprels is not None and gold_labels else None
        # labels an unlabelled parse writes say nothing against the gold's; compared as LAS compares them
        labelled = marks.gold_deprels is not None and any(universal_label(label) not in _UNLABELLED
                                                          for label in pred_labels)
        for j, (g, p) in enumerate(zip(gold_heads, pred_heads)):
            i = positions[j]
            marks.gold_heads[i - 1] = placed(g)
            if marks.gold_deprels is not None:
                marks.gold_deprels[i - 1] = gold_labels[j]
            if p != g:
                marks.wrong_heads.add(i)
            elif labelled and universal_label(pred_labels[i - 1]) != universal_label(gold_labels[j]):
                marks.wrong_labels.add(i)
    if gold.tree is not None and (pred.tree is not None or pred.heads is not None):
        gold_labelled, predicted = pair.spans(gold, pred)
        wanted: dict[tuple[int, int], str] = {}
        for label, a, b in gold_labelled:
            if 1 < b - a < len(positions):
                wanted.setdefault((a, b), label)
        marks.missing_spans = sorted((label, placed(a + 1) - 1, placed(b)) for (a, b), label in wanted.items()
                                     if (a, b) not in predicted)
        if pred.tree is not None:
            marks.wrong_spans = {(a, b) for a, b in _spans(pred.tree) if _scored_span(a, b, pair.pred_keep) and
                                 _restricted(a, b, pair.pred_keep) not in wanted}
    return marks


def unscored_mask(sentence: Sentence, marks: Marks | None) -> list[bool]:
    """The tokens drawn dim: against a gold, those ``eval`` leaves out; alone, the sentence's own punctuation."""
    if marks is None:
        return sentence_punct_mask(sentence)
    return [i in marks.unscored for i in range(1, len(sentence.words) + 1)]


def _restricted(a: int, b: int, keep: Sequence[bool]) -> tuple[int, int]:
    """A predicted span over the scored words only (as UF1 restricts it)."""
    return sum(keep[:a]), sum(keep[:b])


def _scored_span(a: int, b: int, keep: Sequence[bool]) -> bool:
    """True when the span, over the scored words, is one UF1 counts (more than one word, not all of them)."""
    start, end = _restricted(a, b, keep)
    return 1 < end - start < sum(keep)


def load_pictures(path: str, gold_path: str | None = None, sentence: int | None = None,
                  ) -> tuple[list[Sentence], list[Marks | None] | None]:
    """What ``depinduce show`` draws: the sentences of ``path`` (any readable format; heads need not form a tree,
    so a decoder's faulty output can be looked at) and, with a gold file over the same tokens, their marks.

    ``sentence`` (1-based) keeps only that sentence; the whole files are still checked against each other."""
    sentences = read_sentences(path, check_trees=False)
    marks: list[Marks | None] | None = None
    if gold_path is not None:
        gold = read_sentences(gold_path, check_trees=False)
        pairs = align(gold, sentences, gold_path=display_name(gold_path), pred_path=display_name(path))
        marks = [compare(p, g, pair) for p, g, pair in zip(sentences, gold, pairs)]
    if sentence is not None:
        if not 1 <= sentence <= len(sentences):
            raise UsageError(f"--sentence {sentence}: {display_name(path)} has {len(sentences)} sentences")
        chosen = sentences[sentence - 1]
        if chosen.sent_id is None:  # its caption keeps its number in the file
            chosen.sent_id = str(sentence)
        sentences = [chosen]
        marks = [marks[sentence - 1]] if marks is not None else None
    return sentences, marks
