"""UF1 (sentence- and corpus-level) and per-label recall on hand-computed cases."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from nltk import Tree

from depinduce.metrics.constituency import SpanCounts, phrase_label, score_spans, sentence_f1
from depinduce.structures.spans import labelled_spans, scored_spans


def spans_of(bracketing: str) -> tuple[set[tuple[int, int]], list[tuple[str, int, int]]]:
    tree = Tree.fromstring(bracketing)
    labelled = labelled_spans(tree)
    return scored_spans(labelled, len(tree.leaves())), labelled


def test_sentence_f1_conventions() -> None:
    # two-word sentence: no spans on either side -> P = 1, R = 1 -> F1 = 1
    assert sentence_f1(set(), set()) == (0, 1.0)
    # gold has no spans, prediction has one: R = 1 by convention, P = 0/1 -> F1 = 0
    assert sentence_f1({(0, 2)}, set()) == (0, 0.0)
    # prediction has no spans, gold has one: P = 1 by convention, R = 0/1 -> F1 = 0
    assert sentence_f1(set(), {(0, 2)}) == (0, 0.0)
    # 1 of 2 predicted, 1 of 3 gold: P = 1/2, R = 1/3, F1 = 2 * (1/6) / (5/6) = 2/5
    matched, f1 = sentence_f1({(0, 2), (1, 3)}, {(0, 2), (2, 4), (3, 5)})
    assert matched == 1 and abs(f1 - 0.4) < 1e-12


def test_sentence_and_corpus_level_differ_as_computed_by_hand() -> None:
    total = SpanCounts()
    # s1: gold (S (NP a b) (VP c (NP d e))) -> {(0,2), (2,5), (3,5)}; right-branching -> {(1,5), (2,5), (3,5)}
    gold1, lab1 = spans_of("(S (NP (D a) (N b)) (VP (V c) (NP (D d) (N e))))")
    pred1, _ = spans_of("(X a (X b (X c (X d e))))")
    assert gold1 == {(0, 2), (2, 5), (3, 5)} and pred1 == {(1, 5), (2, 5), (3, 5)}
    s1 = score_spans(gold1, pred1, gold_labelled=lab1)
    # matched 2 -> P = R = 2/3 -> F1 = 2/3
    assert (s1.matched, s1.predicted, s1.gold) == (2, 3, 3) and abs(s1.f1_sum - 2 / 3) < 1e-12
    total.add(s1)
    # s2: two words -> no spans at all -> F1 = 1
    gold2, lab2 = spans_of("(S (NP (N x)) (VP (V y)))")
    assert gold2 == set()
    total.add(score_spans(gold2, set(), gold_labelled=lab2))
    # s3: gold (S (NP a b) (VP c d)) -> {(0,2), (2,4)}; left-branching -> {(0,2), (0,3)} -> matched 1, F1 = 1/2
    gold3, lab3 = spans_of("(S (NP (D a) (N b)) (VP (V c) (N d)))")
    pred3, _ = spans_of("(X (X (X a b) c) d)")
    total.add(score_spans(gold3, pred3, gold_labelled=lab3))
    # sentence-level: (2/3 + 1 + 1/2) / 3 = 13/18 = 72.22...%
    assert total.sentences == 3
    assert abs(total.sentence_f1 - 100 * 13 / 18) < 1e-9
    # corpus-level: matched 2+0+1 = 3, predicted 3+0+2 = 5, gold 3+0+2 = 5 -> P = R = F1 = 60%
    assert (total.matched, total.predicted, total.gold) == (3, 5, 5)
    assert abs(total.corpus_f1 - 60.0) < 1e-9
    # label recall: NP gold spans s1 (0,2) miss, (3,5) hit, s3 (0,2) hit -> 2/3; VP s1 (2,5) hit, s3 (2,4) miss
    # -> 1/2; S spans the whole sentence and NP/VP over one word are excluded, so they are not counted
    assert dict(total.label_total) == {"NP": 3, "VP": 2}
    assert dict(total.label_found) == {"NP": 2, "VP": 1}
    assert total.labels_by_frequency() == ["NP", "VP"]
    assert abs(total.label_recall("NP") - 200 / 3) < 1e-9
    d = total.to_dict()
    assert d["uf1_corpus"]["matched"] == 3 and list(d["label_recall"]) == ["NP", "VP"]


def test_unary_chain_counts_each_label_once_and_function_tags_are_dropped() -> None:
    # (S (NP-SBJ a b) (VP (VP-X c d))) gold spans {(0,2), (2,4)}; VP and VP-X over (2,4) -> one VP counted
    gold, labelled = spans_of("(S (NP-SBJ (D a) (N b)) (VP (VP-X (V c) (N d))))")
    counts = score_spans(gold, {(2, 4)}, gold_labelled=labelled)
    assert dict(counts.label_total) == {"NP": 1, "VP": 1}
    assert dict(counts.label_found) == {"VP": 1}
    assert phrase_label("NP-SBJ-1") == "NP" and phrase_label("NP=2") == "NP" and phrase_label("-NONE-") == "-NONE-"


def test_corpus_level_conventions_when_nothing_is_predicted() -> None:
    c = SpanCounts()
    c.add(score_spans({(0, 2)}, set()))
    # no predicted spans anywhere: P = 100 by convention, R = 0 -> F1 = 0
    assert (c.precision, c.recall, c.corpus_f1) == (100.0, 0.0, 0.0)
    assert SpanCounts().corpus_f1 is None and SpanCounts().sentence_f1 is None


span_sets = st.sets(st.tuples(st.integers(0, 6), st.integers(0, 6)).filter(lambda s: s[1] - s[0] > 1), max_size=8)


@given(span_sets, span_sets)
def test_f1_is_symmetric_and_bounded(a: set[tuple[int, int]], b: set[tuple[int, int]]) -> None:
    ma, fa = sentence_f1(a, b)
    mb, fb = sentence_f1(b, a)
    assert ma == mb and abs(fa - fb) < 1e-12 and 0.0 <= fa <= 1.0
    assert sentence_f1(a, a)[1] == 1.0
