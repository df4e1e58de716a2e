"""Dependency metrics on hand-computed cases (arithmetic in the comments) and a few properties."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from depinduce.metrics.dependency import DependencyCounts, score_heads, undirected_edges, universal_label

GOLD = [2, 0, 2]  # w1 <- w2 (root) -> w3


def test_dda_uda_root_on_a_tree() -> None:
    # pred: w1 -> w2, w2 -> w3, w3 -> ROOT
    c = score_heads(GOLD, [2, 3, 0])
    # directed: w1 2=2 yes, w2 3!=0, w3 0!=2 -> 1/3
    assert (c.directed, c.tokens) == (1, 3)
    # gold edges {1,2} {0,2} {2,3}; pred edges {1,2} {2,3} {0,3} -> common {1,2} {2,3} -> 2/3
    assert c.undirected == 2
    assert abs(c.dda - 100 / 3) < 1e-12 and abs(c.uda - 200 / 3) < 1e-12
    # gold root w2, predicted root w3 -> wrong; pred is one tree
    assert (c.root_correct, c.well_formed, c.sentences) == (0, 1, 1)
    assert c.las is None and c.labelled_tokens == 0


def test_cycle_is_scored_and_marked_not_well_formed() -> None:
    # pred: w1 -> w2, w2 -> w1 (cycle), w3 -> w2; no root at all
    c = score_heads(GOLD, [2, 1, 2])
    # directed: w1 yes, w2 1!=0, w3 yes -> 2/3
    assert c.directed == 2
    # pred edges {1,2} {1,2} {2,3} = set {1,2} {2,3}; both gold -> 2/3 (the duplicate counts once)
    assert c.undirected == 2
    # gold roots [w2], predicted roots [] -> wrong; not a tree
    assert (c.root_correct, c.well_formed) == (0, 0)


def test_two_roots_are_a_wrong_root_even_if_they_include_the_gold_root() -> None:
    # pred: w1 -> ROOT, w2 -> ROOT, w3 -> w2: directed w2, w3 -> 2/3; roots {w1, w2} != {w2}
    c = score_heads(GOLD, [0, 0, 2])
    assert (c.directed, c.root_correct, c.well_formed) == (2, 0, 0)
    # edges {0,1} {0,2} {2,3}: common with gold {0,2} {2,3} -> 2
    assert c.undirected == 2


def test_root_edge_counts_in_uda() -> None:
    # identical trees: every edge, the root edge {2,0} included, is found -> 3/3
    c = score_heads(GOLD, GOLD)
    assert (c.directed, c.undirected, c.root_correct) == (3, 3, 1)
    # reversed edge w2 -> w1 with w1 the root: directed only w3 (2=2) -> 1/3;
    # edges {0,1} {1,2} {2,3}; common {1,2} {2,3} -> 2/3 (the reversed edge still counts undirected)
    c = score_heads(GOLD, [0, 1, 2])
    assert (c.directed, c.undirected) == (1, 2)


def test_las_compares_universal_labels_only() -> None:
    assert universal_label("nsubj:pass") == "nsubj"
    assert universal_label("obl:tmod:x") == "obl"
    assert universal_label("root") == "root"
    c = score_heads(
        GOLD,
        [2, 0, 3],
        gold_labels=["nsubj:pass", "root", "obj"],
        pred_labels=["nsubj", "root", "obj"],
    )
    # heads: w1 yes, w2 yes, w3 no (3 != 2); labels: nsubj:pass~nsubj yes, root yes, obj yes
    # LAS counts head AND label: w1, w2 -> 2/3 ; DDA 2/3 as well
    assert (c.labelled, c.labelled_tokens, c.directed) == (2, 3, 2)
    c = score_heads(GOLD, GOLD, gold_labels=["nsubj", "root", "obj"], pred_labels=["nsubj", "root", "iobj"])
    # all heads right; obj != iobj -> LAS 2/3, DDA 3/3
    assert (c.labelled, c.directed) == (2, 3)
    assert abs(c.las - 200 / 3) < 1e-12


def test_counts_add_micro_averages() -> None:
    total = DependencyCounts()
    total.add(score_heads(GOLD, [2, 3, 0]))  # 1/3 directed, 2/3 undirected
    total.add(score_heads([0], [0]))  # 1/1, 1/1, root right
    # DDA (1+1)/(3+1) = 50%, UDA (2+1)/4 = 75%, root 1/2 sentences, both well-formed
    assert (total.tokens, total.directed, total.undirected) == (4, 2, 3)
    assert (total.dda, total.uda, total.root_accuracy, total.well_formed_share) == (50.0, 75.0, 50.0, 100.0)
    d = total.to_dict()
    assert d["dda"] == {"correct": 2, "total": 4, "percent": 50.0}
    assert d["las"] is None


def test_well_formedness_can_be_judged_by_the_caller() -> None:
    # [0, 1] is a tree, but the caller says the submitted (pre-stripping) prediction was not
    assert score_heads([0, 1], [0, 1], pred_well_formed=False).well_formed == 0


def test_empty_counter_has_no_percentages() -> None:
    c = DependencyCounts()
    assert c.dda is None and c.uda is None and c.root_accuracy is None


@st.composite
def random_tree(draw: st.DrawFn, n: int | None = None) -> list[int]:
    """A random single-rooted tree: words taken in a random order, each attached to an earlier-taken word."""
    size = draw(st.integers(1, 12)) if n is None else n
    order = draw(st.permutations(list(range(1, size + 1))))
    heads = [0] * size
    for k, word in enumerate(order[1:], start=1):
        heads[word - 1] = order[draw(st.integers(0, k - 1))]
    return heads


@given(st.data())
def test_uda_counts_gold_edges_found_in_either_direction(data: st.DataObject) -> None:
    # docs/evaluation-protocol.md: for well-formed trees UDA equals counting each gold edge found in either direction
    gold = data.draw(random_tree())
    pred = data.draw(random_tree(len(gold)))
    either = sum(
        1 for i, g in enumerate(gold, start=1) if pred[i - 1] == g or (g != 0 and pred[g - 1] == i)
    )
    c = score_heads(gold, pred)
    assert c.undirected == either
    assert c.directed <= c.undirected <= c.tokens
    assert len(undirected_edges(gold)) == len(gold)
    assert score_heads(gold, gold).undirected == len(gold)
