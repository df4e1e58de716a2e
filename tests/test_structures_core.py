"""Head lists and spans: tree checks, punctuation removal/re-attachment, span projection, distance trees."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from nltk import Tree

from depinduce.structures.dependency import (
    attach_hidden,
    find_cycle,
    is_projective,
    is_tree,
    reattach,
    subtree_spans,
    tree_problem,
)
from depinduce.structures.spans import (
    binary_tree_from_distances,
    labelled_spans,
    restrict_spans,
    scored_spans,
    spans_to_tree,
)


def test_tree_problems_are_named() -> None:
    assert tree_problem([2, 0, 2]) is None
    assert "2 words attached to ROOT" in tree_problem([0, 0])
    assert "cycle through words" in tree_problem([2, 3, 2, 0])
    assert "outside 0..2" in tree_problem([3, 0])
    assert "its own head" in tree_problem([1, 0])
    assert find_cycle([2, 1]) == [1, 2]
    assert is_tree([]) and is_tree([0])


def test_reattach_to_nearest_kept_ancestor() -> None:
    # "Vinken , 61 years old ," style: word 3 (punct) heads word 4; removing 3 sends 4 to 3's head (1).
    heads = [0, 1, 1, 3]
    assert reattach(heads, [True, True, False, True]) == [0, 1, 1]
    # a removed root: its kept dependents go to ROOT
    assert reattach([2, 0, 2], [True, False, True]) == [0, 0]


def test_reattach_survives_cycles() -> None:
    # argmax output 1->2->3->2 with word 2 removed: 1 walks 2 -> 3 (kept); 3 walks 2 -> back to itself, which
    # stays a self-loop (a wrong head), never a root attachment
    assert reattach([2, 3, 2], [True, False, True]) == [2, 2]
    # a direct self-loop too; a walk into a cycle among removed words ends at ROOT
    assert reattach([1, 0], [True, True]) == [1, 0]
    assert reattach([2, 3, 2], [True, False, False]) == [0]


def test_attach_hidden_rule() -> None:
    # tokens: " Dogs bark , loudly . "   visible: Dogs bark loudly  (bark is root)
    hidden = [True, False, False, True, False, True, True]
    heads = attach_hidden([2, 0, 2], hidden)
    # opening quote -> next visible word (Dogs=2); "," -> previous visible word (bark=3);
    # "." and the closing quote come after the last visible word -> the root word (bark=3)
    assert heads == [2, 3, 0, 3, 3, 3, 3]
    assert attach_hidden([], [True, True]) == [0, 1]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_attach_hidden_keeps_trees_and_projectivity(data) -> None:
    n = data.draw(st.integers(1, 8))
    # a random projective tree: right-branching chain is projective; use random order of chain/flat trees
    kind = data.draw(st.sampled_from(["right", "left", "flat"]))
    heads = {"right": [i + 2 for i in range(n - 1)] + [0], "left": list(range(n)), "flat": [0] + [1] * (n - 1)}[kind]
    hidden = data.draw(st.lists(st.booleans(), min_size=n, max_size=n + 6))
    hidden = hidden + [False] * max(0, n - hidden.count(False))
    while hidden.count(False) > n:
        hidden.remove(False)
    full = attach_hidden(heads, hidden)
    assert is_tree(full) and is_projective(full)
    assert reattach(full, [not h for h in hidden]) == heads


def test_subtree_spans() -> None:
    # "the dog barks": the->dog, dog->barks, barks root
    assert subtree_spans([2, 3, 0]) == [(0, 1), (0, 2), (0, 3)]


def test_labelled_spans_and_punct_projection() -> None:
    tree = Tree.fromstring("(S (NP (NNP Pierre) (NNP Vinken)) (, ,) (VP (MD will) (VP (VB join))) (. .))")
    spans = labelled_spans(tree)
    assert ("NP", 0, 2) in spans and ("VP", 3, 5) in spans and ("S", 0, 6) in spans
    keep = [True, True, False, True, True, False]
    projected = restrict_spans(spans, keep)
    assert sorted(projected) == sorted([("NP", 0, 2), ("VP", 3, 4), ("VP", 2, 4), ("S", 0, 4)])
    # VP(join) collapses to length 1, S spans the sentence: both excluded from scoring
    assert scored_spans(projected, 4) == {(0, 2), (2, 4)}


def test_spans_to_tree_and_distances() -> None:
    words = "a b c d".split()
    assert str(spans_to_tree(words, [(1, 3)])) == "( a ( b c) d)"
    assert labelled_spans(binary_tree_from_distances(words, [3, 2, 1])) == [("", 2, 4), ("", 1, 4), ("", 0, 4)]
    left = binary_tree_from_distances(words, [1, 2, 3])
    assert {(a, b) for _, a, b in labelled_spans(left)} == {(0, 2), (0, 3), (0, 4)}
    # ties split at the leftmost maximum
    assert labelled_spans(binary_tree_from_distances(words, [5, 5, 5])) == labelled_spans(
        binary_tree_from_distances(words, [3, 2, 1])
    )
    long = binary_tree_from_distances([str(i) for i in range(600)], [float(i % 7) for i in range(599)])
    assert len(long.leaves()) == 600
