"""StructFormer's joint distances + heights -> dependency algorithm (appendix A.1)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from depinduce.structures.dependency import is_projective, is_tree
from depinduce.structures.joint import dependency_from_distances
from depinduce.structures.spans import binary_tree_from_distances, labelled_spans


def build_tree_reference(d: list[float], h: list[float]) -> list[int]:
    """Algorithm 3 transcribed literally (recursive, 0-based), as an oracle for small inputs."""
    heads = [0] * len(h)

    def build(lo: int, hi: int) -> int:  # words lo..hi inclusive; returns the span's parent word
        if lo == hi:
            return lo
        split = max(range(lo, hi), key=lambda i: (d[i], -i))  # argmax: first maximum
        left, right = build(lo, split), build(split + 1, hi)
        if h[left] > h[right]:
            heads[right] = left + 1
            return left
        heads[left] = right + 1
        return right

    if h:
        build(0, len(h) - 1)
    return heads


def test_hand_checked_example() -> None:
    # words w1..w4, distances between them 1 | 3 | 2, heights 0.5, 2, 1, 3:
    #   split at the largest distance (3, between w2 and w3): [w1 w2] [w3 w4]
    #   [w1 w2]: 0.5 > 2 is false, so w1 depends on w2, which heads the span (height 2)
    #   [w3 w4]: 1 > 3 is false, so w3 depends on w4 (height 3)
    #   top: 2 > 3 is false, so w2 depends on w4; w4 is the root
    assert dependency_from_distances([1, 3, 2], [0.5, 2, 1, 3]) == [2, 4, 4, 0]


def test_tie_rules() -> None:
    # equal heights: the comparison is strict, so the right parent wins
    assert dependency_from_distances([1.0], [1.0, 1.0]) == [2, 0]
    # equal distances: the leftmost maximum splits first -> [w1] [w2 w3]; w2 (1) < w3 (2) so w2 -> w3;
    # then w1 (3) > w3 (2) so w3 -> w1.  (Splitting at the rightmost maximum would give [0, 1, 1].)
    assert dependency_from_distances([2, 2], [3, 1, 2]) == [0, 3, 1]


def test_a_word_can_attach_below_the_highest_word() -> None:
    # [w1 w2] split off first; inside it w1 (low) attaches to w2 even though w3 is the highest word overall
    assert dependency_from_distances([0.0, 9.0], [0.0, 1.0, 5.0]) == [2, 3, 0]


def test_small_inputs_and_errors() -> None:
    assert dependency_from_distances([], []) == []
    assert dependency_from_distances([], [0.3]) == [0]
    assert dependency_from_distances(torch.tensor([0.2, 0.1]), np.array([1.0, 2.0, 3.0])) == [3, 3, 0]
    with pytest.raises(ValueError):
        dependency_from_distances([1.0, 2.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        dependency_from_distances([float("nan")], [1.0, 2.0])


numbers = st.one_of(st.integers(0, 3).map(float), st.floats(-10, 10, allow_nan=False))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12).flatmap(lambda n: st.tuples(st.lists(numbers, min_size=n - 1, max_size=n - 1),
                                                      st.lists(numbers, min_size=n, max_size=n))))
def test_matches_the_papers_recursion_and_is_a_projective_tree(dh: tuple[list[float], list[float]]) -> None:
    d, h = dh
    heads = dependency_from_distances(d, h)
    assert heads == build_tree_reference(d, h)
    assert is_tree(heads) and is_projective(heads)
    # the root is the rightmost highest word
    assert heads.index(0) == max(i for i, x in enumerate(h) if x == max(h))
    # every constituent of the binary tree from the same distances has exactly one word headed outside it
    tree = binary_tree_from_distances([str(i) for i in range(len(h))], d)
    for _, start, end in labelled_spans(tree):
        outside = [i for i in range(start, end) if not start < heads[i] <= end]
        assert len(outside) == 1


def test_five_hundred_words_without_recursion_limits() -> None:
    rng = np.random.default_rng(0)
    heads = dependency_from_distances(rng.random(499), rng.random(500))
    assert len(heads) == 500 and is_tree(heads)
    # sorted distances make the deepest possible split tree (a 500-level chain)
    chain = dependency_from_distances(list(range(499)), list(range(500)))
    assert chain == [i + 2 for i in range(499)] + [0]
