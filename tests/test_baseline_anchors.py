"""The trivial baselines reproduce docs/evaluation-protocol.md's reference numbers on the NLTK PTB sample.

Gold comes straight from nltk's corpora (dependency_treebank for heads, treebank for trees) and the baselines
are built here over the punctuation-free words, so these anchors check ``evaluate``'s protocol (punctuation
rule, re-attachment, span clean-up, both F1 averages, the WSJ10 length filter) against numbers computed
independently of depinduce.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from depinduce.data.punct import is_punct_tag
from depinduce.structures.sentence import Sentence
from depinduce.metrics import EvalResult, evaluate
from depinduce.structures.spans import binary_tree_from_distances

TEST_FILES = [f"wsj_{i:04d}" for i in range(150, 200)]


def kept_words(words: list[str], tags: list[str]) -> list[str]:
    return [w for w, t in zip(words, tags) if not is_punct_tag(t)]


def right_heads(n: int) -> list[int]:
    """Every word's head is the next word; the last word is the root."""
    return [i + 2 for i in range(n - 1)] + [0] if n else []


def left_heads(n: int) -> list[int]:
    """Every word's head is the previous word; the first word is the root."""
    return [0] + list(range(1, n)) if n else []


def branching_tree_sentence(words: list[str], right: bool) -> Sentence:
    """A binary right- (or left-) branching tree: split first at the leftmost (or rightmost) boundary."""
    n = len(words)
    distances = [float(n - i) if right else float(i) for i in range(n - 1)]
    return Sentence(words=words, tree=binary_tree_from_distances(words, distances))


@pytest.fixture(scope="module")
def dependency_gold(nltk_data: Path) -> list[Sentence]:
    from nltk.corpus import dependency_treebank

    gold = []
    for fileid in TEST_FILES:
        for graph in dependency_treebank.parsed_sents(fileid + ".dp"):
            nodes = [graph.nodes[i] for i in range(1, len(graph.nodes))]
            gold.append(
                Sentence(
                    words=[node["word"] for node in nodes],
                    xpos=[node["tag"] for node in nodes],
                    heads=[node["head"] for node in nodes],
                )
            )
    return gold


@pytest.fixture(scope="module")
def tree_gold(nltk_data: Path) -> dict[str, list[Sentence]]:
    from nltk.corpus import treebank

    by_file: dict[str, list[Sentence]] = {}
    for fileid in treebank.fileids():
        sentences = []
        for tree in treebank.parsed_sents(fileid):
            words, tags = zip(*tree.pos())
            sentences.append(Sentence(words=list(words), xpos=list(tags), tree=tree))
        by_file[fileid.removesuffix(".mrg")] = sentences
    return by_file


def dependency_baseline(gold: list[Sentence], heads_for: object) -> EvalResult:
    preds = []
    for s in gold:
        assert s.xpos is not None
        words = kept_words(s.words, s.xpos)
        preds.append(Sentence(words=words, heads=heads_for(len(words))))  # type: ignore[operator]
    return evaluate(gold, preds)


def tree_baseline(gold: list[Sentence], right: bool, max_length: int | None = None) -> EvalResult:
    preds = []
    for s in gold:
        assert s.xpos is not None
        preds.append(branching_tree_sentence(kept_words(s.words, s.xpos), right))
    return evaluate(gold, preds, max_length=max_length)


def test_dependency_anchors(dependency_gold: list[Sentence]) -> None:
    right = dependency_baseline(dependency_gold, right_heads)
    assert right.overall.tokens == 13812
    assert right.protocol.rules_used == {"ptb": len(dependency_gold)}
    dep = right.overall.dependency
    assert (round(dep.dda, 1), round(dep.uda, 1)) == (30.3, 50.2)
    left = dependency_baseline(dependency_gold, left_heads).overall.dependency
    assert left.tokens == 13812
    assert (round(left.dda, 1), round(left.uda, 1)) == (20.0, 49.9)


def test_constituency_anchors_on_the_test_split(tree_gold: dict[str, list[Sentence]]) -> None:
    gold = [s for fileid in TEST_FILES for s in tree_gold[fileid]]
    right = tree_baseline(gold, right=True).overall.constituency
    assert right.sentences == 658
    assert (round(right.sentence_f1, 1), round(right.corpus_f1, 1)) == (38.9, 36.2)
    left = tree_baseline(gold, right=False).overall.constituency
    assert left.sentences == 658
    assert (round(left.sentence_f1, 1), round(left.corpus_f1, 1)) == (7.8, 6.5)


def test_wsj10_right_branching_anchor(tree_gold: dict[str, list[Sentence]]) -> None:
    gold = [s for sentences in tree_gold.values() for s in sentences]
    result = tree_baseline(gold, right=True, max_length=10)
    con = result.overall.constituency
    assert con.sentences == 542
    assert (round(con.sentence_f1, 1), round(con.corpus_f1, 1)) == (57.6, 55.0)
    assert all(scores.sentences == 0 for name, scores in result.by_length.items() if name != "1-10")
