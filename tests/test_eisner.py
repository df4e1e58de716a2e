"""Eisner's algorithm, batched: checked against brute-force enumeration of projective single-rooted trees."""

from __future__ import annotations


import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from depinduce.structures.dependency import is_projective, is_tree
from depinduce.structures.eisner import eisner, eisner_batch, eisner_single
from brute_force import best_key, projective_trees


def assert_best_projective(S: np.ndarray, heads: list[int]) -> None:
    n = S.shape[0] - 1
    assert len(heads) == n
    if n == 0:
        return
    assert is_tree(heads) and is_projective(heads)
    got, best = best_key(S, np.array([heads])), best_key(S, projective_trees(n))
    assert got[0] == best[0]
    assert got[1] == pytest.approx(best[1], abs=1e-9)


def random_scores(rng: np.random.Generator, n: int, ties: bool, forbidden_share: float) -> np.ndarray:
    if ties:
        S = rng.integers(-2, 3, size=(n + 1, n + 1)).astype(float)
    else:
        S = rng.normal(0.0, 3.0, size=(n + 1, n + 1))
    S[rng.random(S.shape) < forbidden_share] = -np.inf
    return S


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lengths=st.lists(st.integers(0, 7), min_size=1, max_size=5),
    extra=st.integers(0, 2),
    seed=st.integers(0, 2**32 - 1),
    ties=st.booleans(),
    forbidden_share=st.sampled_from([0.0, 0.0, 0.2, 0.5]),
)
def test_batch_with_mixed_lengths_is_optimal(
    lengths: list[int], extra: int, seed: int, ties: bool, forbidden_share: float
) -> None:
    rng = np.random.default_rng(seed)
    N = max(lengths) + extra
    batch = np.full((len(lengths), N + 1, N + 1), np.nan)  # padding holds garbage that must be ignored
    for b, n in enumerate(lengths):
        batch[b, : n + 1, : n + 1] = random_scores(rng, n, ties, forbidden_share)
    out = eisner(torch.tensor(batch), torch.tensor(lengths))
    assert len(out) == len(lengths)
    for b, n in enumerate(lengths):
        assert_best_projective(batch[b, : n + 1, : n + 1], out[b])


def test_projective_enumeration_counts() -> None:
    # projective single-rooted trees over n words: 1, 2, 7, 30, 143, 728, 3876 (OEIS A006013)
    assert [len(projective_trees(n)) for n in range(1, 8)] == [1, 2, 7, 30, 143, 728, 3876]


def test_single_sentences_of_seven_words() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        S = random_scores(rng, 7, ties=False, forbidden_share=0.0)
        assert_best_projective(S, eisner_single(S))


def test_single_root_is_enforced() -> None:
    S = np.full((4, 4), -5.0)
    S[1:, 0] = 0.0  # every word would rather attach to ROOT
    heads = eisner_single(S)
    assert sum(h == 0 for h in heads) == 1


def test_prefers_projective_tree_over_better_crossing_one() -> None:
    # the only zero-cost tree (ROOT->2, 2->3, 2->4, 3->1) has crossing arcs 3->1 and 2->4, so the best
    # projective tree must pay for one -10 arc, and Eisner must still return a projective tree
    S = np.full((5, 5), -10.0)
    S[2, 0] = 0.0
    S[4, 2] = 0.0
    S[1, 3] = 0.0
    S[3, 2] = 0.0
    heads = eisner_single(S)
    assert is_projective(heads) and is_tree(heads)
    assert sum(S[i + 1, h] for i, h in enumerate(heads)) == -10.0
    assert_best_projective(S, heads)


def test_batch_list_of_different_sizes_matches_single() -> None:
    rng = np.random.default_rng(1)
    matrices = [random_scores(rng, n, ties=False, forbidden_share=0.1) for n in (3, 0, 7, 1, 5, 6)]
    expected = [eisner_single(m) for m in matrices]
    assert eisner_batch(matrices) == expected
    assert eisner_batch(matrices, max_cells=60) == expected  # forces several small batches
    assert eisner_batch([]) == []


def test_float32_tensor_input_and_bad_inputs() -> None:
    S = torch.randn(2, 5, 5)
    before = S.clone()
    out = eisner(S, [4, 2])
    assert torch.equal(S, before)
    assert is_tree(out[0]) and is_tree(out[1]) and len(out[1]) == 2
    with pytest.raises(ValueError):
        eisner(S, [5, 1])
    with pytest.raises(ValueError):
        eisner(S, [4])
    S[0, 1, 2] = float("nan")
    with pytest.raises(ValueError):
        eisner(S, [4, 2])


def test_long_sentence_is_a_projective_tree() -> None:
    rng = np.random.default_rng(2)
    heads = eisner_single(rng.standard_normal((501, 501)))
    assert len(heads) == 500 and is_tree(heads) and is_projective(heads)
