"""Bracketed trees: writing, reading (labelled vs unlabelled), PTB files, escapes and unbalanced input."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk import Tree

from depinduce.structures.sentence import Sentence
from depinduce.errors import DepinduceError, InputError
from depinduce.io import parse_brackets_text, read_sentences, tree_to_brackets, write_sentences

DATA = Path(__file__).parent / "data" / "io"


def _read(text: str, labels: bool | None = None) -> list[Sentence]:
    return parse_brackets_text(text, "t.txt", labels=labels)


def test_unlabelled_tree_is_written_on_one_line():
    tree = Tree("", ["w1", Tree("", ["w2", "w3"])])
    assert tree_to_brackets(tree) == "(w1 (w2 w3))"
    assert tree_to_brackets(Tree("", [Tree("", ["a", "b"]), "c", Tree("", ["d", "e"])])) == "((a b) c (d e))"


def test_labelled_tree_is_written_ptb_style():
    tree = Tree("S", [Tree("NP", [Tree("DT", ["The"]), Tree("NN", ["dog"])]), Tree("VP", [Tree("VBZ", ["barks"])])])
    assert tree_to_brackets(tree) == "(S (NP (DT The) (NN dog)) (VP (VBZ barks)))"


def test_round_brackets_in_words_are_escaped_other_brackets_kept():
    tree = Tree("", ["f(x)", Tree("", ["(", "[y]", "{z}", ")"])])
    assert tree_to_brackets(tree) == "(f-LRB-x-RRB- (-LRB- [y] {z} -RRB-))"
    (sentence,) = _read(tree_to_brackets(tree))
    assert sentence.words == ["f-LRB-x-RRB-", "-LRB-", "[y]", "{z}", "-RRB-"]  # kept as written, PTB-style


def test_whitespace_inside_a_word_keeps_the_leaf_count():
    assert tree_to_brackets(Tree("", ["New York", "x"])) == "(New_York x)"


def test_deep_trees_need_no_recursion():
    tree: Tree | str = "w0"
    for k in range(1, 3000):
        tree = Tree("", [tree, f"w{k}"])
    text = tree_to_brackets(tree)
    (sentence,) = _read(text)
    assert len(sentence.words) == 3000 and sentence.words[:2] == ["w0", "w1"]


def test_labelled_file_is_recognised():
    (sentence,) = _read("(S (NP (DT The) (NN dog)) (VP (VBZ barks)))\n")
    assert sentence.words == ["The", "dog", "barks"]
    assert sentence.xpos == ["DT", "NN", "VBZ"]
    assert sentence.tree.label() == "S"


@pytest.mark.parametrize(
    "text, words",
    [
        ("(The (dog barks))", ["The", "dog", "barks"]),  # reads as unary labels, but 'The'/'dog' are words
        ("((a b) c)", ["a", "b", "c"]),  # a node starting with a subtree
        ("(a (b c) (d e))", ["a", "b", "c", "d", "e"]),  # branches, but the would-be labels are lowercase
        ("(1 (2 3))", ["1", "2", "3"]),  # tag-like atoms, but a labelled tree would never branch
        ("(a b c)", ["a", "b", "c"]),
        ("(x)", ["x"]),
    ],
)
def test_unlabelled_trees_are_recognised(text, words):
    (sentence,) = _read(text)
    assert sentence.words == words
    assert sentence.xpos is None
    assert sentence.tree.label() == ""


def test_decision_is_per_file():
    # alone, the first tree reads as labelled; the second cannot, so the whole file is unlabelled
    first, second = _read("(A (B C) (D E))\n((x y) z)\n")
    assert first.words == ["A", "B", "C", "D", "E"]
    assert second.words == ["x", "y", "z"]


def test_caller_can_force_the_reading():
    (labelled,) = _read("(a (b c))", labels=True)
    assert labelled.tree == Tree("a", [Tree("b", ["c"])])
    assert labelled.words == ["c"] and labelled.xpos == ["b"]
    (unlabelled,) = _read("(S (NP (DT The) (NN dog)) (VP (VBZ barks)))", labels=False)
    assert unlabelled.words[:4] == ["S", "NP", "DT", "The"]
    with pytest.raises(InputError) as err:
        _read("(S (NP a b))\n(S ((x y) z))", labels=True)
    assert str(err.value) == (
        "t.txt:1: not a labelled tree: node 'NP' has 2 words directly under it (a preterminal has one)"
    )


def test_forced_labelled_reading_reports_the_offending_line():
    with pytest.raises(InputError) as err:
        _read("(S (NP (DT a)) (VP (V b)))\n(S\n  ((x y) z))\n", labels=True)
    assert str(err.value) == "t.txt:3: not a labelled tree: a node starts with a subtree instead of a label"


def test_ptb_multiline_file_with_root_wrapper():
    first, second = read_sentences(DATA / "ptb_multiline.mrg")
    assert first.tree.label() == "S"  # the ( (S ...) ) wrapper is removed
    assert first.words == ["The", "dog", "barks", "."]
    assert first.xpos == ["DT", "NN", "VBZ", "."]
    assert (first.line, second.line) == (2, 7)
    assert second.words == ["It", "rains"]


def test_nltk_treebank_files_read_like_nltk(nltk_data):
    from nltk.corpus import treebank

    with zipfile.ZipFile(nltk_data / "corpora" / "treebank.zip") as archive:
        for name in ("wsj_0001.mrg", "wsj_0003.mrg"):
            text = archive.read(f"treebank/combined/{name}").decode("utf-8")
            sentences = parse_brackets_text(text, name)
            gold = treebank.parsed_sents(name)
            assert [s.tree for s in sentences] == list(gold)
            assert [s.words for s in sentences] == [t.leaves() for t in gold]


@pytest.mark.parametrize(
    "file, expected",
    [
        ("unclosed.txt", "unclosed.txt:2: unbalanced brackets: '(' opened here is never closed"),
        ("extra_close.txt", "extra_close.txt:2: unbalanced brackets: ')' without a matching '('"),
    ],
)
def test_unbalanced_brackets_are_located(file, expected):
    with pytest.raises(InputError) as err:
        read_sentences(DATA / file, fmt="brackets")
    assert str(err.value) == str(DATA / expected)


def test_other_malformations():
    with pytest.raises(InputError, match=r"^t\.txt:2: empty brackets"):
        _read("(a b)\n(a ())\n")
    with pytest.raises(InputError, match=r"^t\.txt:1: text outside brackets: 'oops'"):
        _read("(a b) oops\n")


def test_write_brackets_one_line_per_sentence_and_refuses_missing_trees():
    out = io.StringIO()
    sentences = [Sentence(words=["a", "b"], tree=Tree("", ["a", "b"])), Sentence(words=["c"], tree=Tree("", ["c"]))]
    assert write_sentences(sentences, out, "brackets") == 2
    assert out.getvalue() == "(a b)\n(c)\n"
    with pytest.raises(DepinduceError, match="sentence 1: has no constituency tree"):
        write_sentences([Sentence(words=["a"])], io.StringIO(), "brackets")


# ------------------------------------------------------------------------------------------------ properties

_ATOM = st.text(alphabet=st.sampled_from(list("abcéΩ中0123.,;'\"[]{}-_$#")), min_size=1, max_size=5)


def _unlabelled_trees():
    return st.recursive(
        _ATOM,
        lambda children: st.lists(children, min_size=1, max_size=4).map(lambda kids: Tree("", kids)),
        max_leaves=25,
    ).filter(lambda t: isinstance(t, Tree))


@settings(max_examples=80, deadline=None)
@given(_unlabelled_trees())
def test_property_unlabelled_round_trip(tree):
    (sentence,) = _read(tree_to_brackets(tree), labels=False)
    assert sentence.words == tree.leaves()
    stripped = tree
    while len(stripped) == 1 and isinstance(stripped[0], Tree):
        stripped = stripped[0]  # a root around a single subtree is dropped on reading
    assert sentence.tree == stripped


_LABEL = st.sampled_from(["S", "NP", "VP", "PP", "SBAR", "NP-SBJ-1", "-NONE-", "PRP$", ",", "."])


def _labelled_trees():
    preterminal = st.builds(lambda tag, word: Tree(tag, [word]), _LABEL, _ATOM)
    return st.recursive(
        preterminal,
        lambda children: st.builds(lambda label, kids: Tree(label, kids), _LABEL,
                                   st.lists(children, min_size=1, max_size=3)),
        max_leaves=20,
    )


@settings(max_examples=80, deadline=None)
@given(_labelled_trees())
def test_property_labelled_round_trip(tree):
    (sentence,) = _read(tree_to_brackets(tree), labels=True)
    assert sentence.tree == tree
    assert sentence.words == tree.leaves()
    assert sentence.xpos == [tag for _, tag in tree.pos()]
