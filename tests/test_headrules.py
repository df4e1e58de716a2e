"""Head rules: the semantics of a rule, the documented table fixes, and agreement with NLTK's conversion."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk import Tree

from depinduce.data.headrules import (
    COLLINS,
    PENN2MALT,
    HeadRule,
    Search,
    dependency_heads,
    get_head_rules,
    head_child,
)
from depinduce.data.ptb import clean_tree, nltk_sample_source, parse_tree, split_trees
from depinduce.errors import DepinduceError
from depinduce.structures.dependency import is_projective, tree_problem


def heads_of(bracketed: str, rules=PENN2MALT) -> list[int]:
    return dependency_heads(Tree.fromstring(bracketed), rules)


# ----------------------------------------------------------------------------------------- rule semantics


def test_priority_list_is_tried_category_by_category() -> None:
    rule = HeadRule("left", (Search("left", frozenset({"VB"})), Search("left", frozenset({"MD"}))))
    # VB is preferred over an earlier MD because categories are tried in order, each over all children.
    assert head_child(rule, ["MD", "VB", "NP"]) == 1
    assert head_child(rule, ["MD", "NP"]) == 0


def test_set_search_takes_the_first_member_in_its_direction() -> None:
    rule = HeadRule("right", (Search("right", frozenset({"NN", "NNS"})),))
    assert head_child(rule, ["NN", "NNS", "JJ"]) == 1


def test_fallback_skips_punctuation_while_a_word_exists() -> None:
    right = HeadRule("right")
    assert head_child(right, ["NNP", "NNP", "."]) == 1
    assert head_child(right, [",", "."]) == 1  # only punctuation: the first child in the direction
    assert head_child(HeadRule("left"), ["``", "NN", "''"]) == 1


def test_last_child_search_and_coordination() -> None:
    assert head_child(COLLINS.rule("NP"), ["NP", "POS"]) == 1
    # Collins: a head right after CC at index >= 2 moves two to the left.
    assert head_child(HeadRule("right"), ["NN", "CC", "NN"], coordination=True) == 0
    assert head_child(HeadRule("right"), ["NN", "CC", "NN"], coordination=False) == 2


@pytest.mark.parametrize(
    ("bracketed", "head_word"),
    [
        # The documented differences from the published table (docs/head-rules.md), each decided by dependency_treebank.
        ("(NP (NNP U.S.) (NX (NX (NNS patents)) (CC and) (NX (NNS rights))))", "U.S."),
        ("(NP (DT a) (NN year) (JJR earlier))", "year"),
        ("(NP (DT an) (JJ additional) (QP ($ $) (CD 55) (CD million)))", "additional"),
        ("(NP (DT the) (JJS largest) (RB newsweekly))", "largest"),
        ("(X (NNP Tray) (NNP Bon) (. ?))", "Bon"),
        # Unchanged conventions: auxiliaries and prepositions head, NPs are headed by their rightmost noun.
        ("(S (NP (NNP Vinken)) (VP (MD will) (VP (VB join))) (. .))", "will"),
        ("(PP (IN of) (NP (NNP Elsevier)))", "of"),
        ("(NP (DT the) (NN stock) (NNS prices))", "prices"),
    ],
)
def test_penn2malt_heads(bracketed: str, head_word: str) -> None:
    tree = Tree.fromstring(bracketed)
    heads = dependency_heads(tree, PENN2MALT)
    assert tree.leaves()[heads.index(0)] == head_word


def test_collins_differs_where_documented() -> None:
    # PP: penn2malt scans left-to-right, Collins right-to-left.
    assert heads_of("(PP (IN because) (IN of) (NP (NN rain)))", PENN2MALT) == [0, 1, 1]
    assert heads_of("(PP (IN because) (IN of) (NP (NN rain)))", COLLINS) == [2, 0, 2]
    # Coordination: Collins moves the head from the last conjunct to the first.
    assert heads_of("(NP (NN cat) (CC and) (NN dog))", PENN2MALT) == [3, 3, 0]
    assert heads_of("(NP (NN cat) (CC and) (NN dog))", COLLINS) == [0, 1, 1]


def test_unknown_table_is_a_user_error() -> None:
    with pytest.raises(DepinduceError, match="penn2malt"):
        get_head_rules("stanford")


# ---------------------------------------------------------------------------------------- tree property

LABELS = ["NP", "VP", "S", "PP", "SBAR", "ADJP", "QP", "X", "FOO"]
TAGS = ["NN", "NNS", "VB", "MD", "IN", "DT", "JJ", ",", ".", "CD", "POS", "CC"]


@st.composite
def trees(draw: st.DrawFn, depth: int = 0) -> Tree:
    if depth >= 3 or draw(st.booleans()):
        return Tree(draw(st.sampled_from(TAGS)), ["w"])
    children = draw(st.lists(trees(depth + 1), min_size=1, max_size=4))  # type: ignore[call-arg]
    return Tree(draw(st.sampled_from(LABELS)), children)


@settings(max_examples=200, deadline=None)
@given(trees())
def test_every_conversion_is_a_projective_tree(tree: Tree) -> None:
    for rules in (PENN2MALT, COLLINS):
        heads = dependency_heads(tree, rules)
        assert len(heads) == len(tree.leaves())
        assert tree_problem(heads) is None
        assert is_projective(heads)


# ------------------------------------------------------------------------------- agreement with the data


def read_dependency_treebank(nltk_data: Path) -> list[list[int]]:
    """Heads of every sentence of NLTK's dependency_treebank, read straight from the zip (nltk's reader is slow)."""
    heads: list[list[int]] = []
    with zipfile.ZipFile(nltk_data / "corpora" / "dependency_treebank.zip") as archive:
        names = sorted(n for n in archive.namelist() if n.endswith(".dp"))
        for name in names:
            for block in archive.read(name).decode("utf-8").strip().split("\n\n"):
                heads.append([int(line.split("\t")[2]) for line in block.strip().split("\n")])
    return heads


def test_agreement_with_nltk_dependency_treebank(nltk_data: Path) -> None:
    """All 3,914 sentences, punctuation included: the converter must reproduce NLTK's heads on >= 99.0%."""
    source = nltk_sample_source()
    files = [f for split in ("train", "dev", "test") for f in source.files[split]]
    gold = read_dependency_treebank(nltk_data)
    assert len(gold) == 3914
    clean = []
    for mrg in files:
        for tree_text in split_trees(mrg.read_bytes().decode("utf-8"), mrg.name):
            clean.append(clean_tree(parse_tree(tree_text, mrg.name)))
    assert len(clean) == 3914
    measured = {}
    for rules in (PENN2MALT, COLLINS):
        agree = total = 0
        for tree, gold_heads in zip(clean, gold):
            heads = dependency_heads(tree, rules)
            assert len(heads) == len(gold_heads)
            assert tree_problem(heads) is None
            agree += sum(a == b for a, b in zip(heads, gold_heads))
            total += len(gold_heads)
        measured[rules.name] = 100 * agree / total
    print(f"head agreement with dependency_treebank: {measured}")
    assert measured["penn2malt"] >= 99.0
    assert measured["penn2malt"] == pytest.approx(100.0)
    # Collins' table is a different convention (e.g. VP heads over auxiliaries): far lower, for information.
    assert 70.0 < measured["collins"] < 95.0
