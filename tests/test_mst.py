"""Chu-Liu/Edmonds with the single-root constraint, checked against brute-force enumeration of all trees."""

from __future__ import annotations


import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from depinduce.structures.dependency import is_tree
from depinduce.structures.mst import chu_liu_edmonds, root_retry_tree
from brute_force import all_single_rooted_trees, best_key


def key_of(S: np.ndarray, heads: list[int]) -> tuple[int, float]:
    return best_key(S, np.array([heads]))


@st.composite
def score_matrices(draw: st.DrawFn, max_n: int = 7) -> np.ndarray:
    """Score matrices for 1..max_n words: small integers (many ties) or reals, some arcs forbidden (-inf)."""
    n = draw(st.integers(1, max_n))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        S = rng.integers(-3, 4, size=(n + 1, n + 1)).astype(float)
    else:
        S = rng.normal(0.0, 3.0, size=(n + 1, n + 1))
    forbidden_share = draw(st.sampled_from([0.0, 0.0, 0.2, 0.5, 0.9]))
    S[rng.random(S.shape) < forbidden_share] = -np.inf
    return S


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(score_matrices())
def test_mst_is_the_best_single_rooted_tree(S: np.ndarray) -> None:
    heads = chu_liu_edmonds(S)
    assert is_tree(heads)
    got, best = key_of(S, heads), best_key(S, all_single_rooted_trees(S.shape[0] - 1))
    assert got[0] == best[0]
    assert got[1] == pytest.approx(best[1], abs=1e-9)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(score_matrices())
def test_root_retry_rule_is_exact_and_unconstrained_mode_is_the_best_tree(S: np.ndarray) -> None:
    """Dozat's "try each of the unconstrained tree's roots" rule finds a best single-rooted tree (the exchange
    argument), and ``single_root=False`` is the best spanning tree with any number of root words."""
    heads = root_retry_tree(S)
    assert is_tree(heads)
    assert key_of(S, heads)[1] == pytest.approx(best_key(S, all_single_rooted_trees(S.shape[0] - 1))[1], abs=1e-9)
    free = chu_liu_edmonds(S, single_root=False)
    n = S.shape[0] - 1
    grid = np.stack(np.meshgrid(*[np.arange(n + 1)] * n, indexing="ij"), -1).reshape(-1, n)
    def reaches_root(heads) -> bool:  # every word reaches ROOT within n steps: no cycle, any number of roots
        for d in range(1, n + 1):
            x = d
            for _ in range(n):
                x = 0 if x == 0 else int(heads[x - 1])
            if x != 0 or heads[d - 1] == d:
                return False
        return True

    assert reaches_root(free)
    if n <= 5:
        trees = np.array([t for t in grid if reaches_root(t)])
        assert key_of(S, free)[1] == pytest.approx(best_key(S, trees)[1], abs=1e-9)


def test_random_matrices_against_brute_force() -> None:
    rng = np.random.default_rng(0)
    for n in (5, 6, 7):
        trees = all_single_rooted_trees(n)
        for _ in range(15):
            S = rng.standard_normal((n + 1, n + 1))
            heads = chu_liu_edmonds(S)
            assert is_tree(heads)
            assert key_of(S, heads)[1] == pytest.approx(best_key(S, trees)[1], abs=1e-9)


def test_enumeration_counts_match_cayley() -> None:
    # single-rooted trees over n words: n choices of root word times n^(n-2) trees rooted there
    for n in range(1, 8):
        assert len(all_single_rooted_trees(n)) == n ** (n - 1)


def test_root_constraint_overrides_greedy_roots() -> None:
    # every word prefers ROOT; the unconstrained optimum would attach all three to it
    S = np.full((4, 4), -5.0)
    S[1:, 0] = [0.0, -0.1, -0.2]
    S[2, 1] = -1.0
    S[3, 1] = -1.0
    assert chu_liu_edmonds(S) == [0, 1, 1]


def test_forbidden_arcs_avoided_when_possible() -> None:
    S = np.zeros((4, 4))
    S[1:, 0] = 10.0  # attractive root arcs
    S[1, 0] = float("-inf")
    S[2, 0] = float("-inf")
    heads = chu_liu_edmonds(S)
    assert heads[2] == 0 and heads[0] != 0 and heads[1] != 0
    everything_forbidden = np.full((4, 4), float("-inf"))
    assert is_tree(chu_liu_edmonds(everything_forbidden))


def test_accepts_torch_lists_any_memory_layout_and_leaves_input_alone() -> None:
    S = torch.randn(6, 6)
    before = S.clone()
    expected = chu_liu_edmonds(S)
    assert chu_liu_edmonds(S.numpy().tolist()) == expected
    assert chu_liu_edmonds(np.asfortranarray(S.numpy())) == expected
    assert chu_liu_edmonds(S.T.contiguous().T) == expected  # a non-contiguous view
    assert torch.equal(S, before)


def test_row_zero_and_diagonal_are_ignored() -> None:
    rng = np.random.default_rng(3)
    S = rng.standard_normal((6, 6))
    noisy = S.copy()
    noisy[0] = np.nan
    np.fill_diagonal(noisy, 1e9)
    assert chu_liu_edmonds(noisy) == chu_liu_edmonds(S)


def test_small_and_bad_inputs() -> None:
    assert chu_liu_edmonds(np.zeros((1, 1))) == []
    assert chu_liu_edmonds(np.zeros((2, 2))) == [0]
    with pytest.raises(ValueError):
        chu_liu_edmonds(np.zeros((3, 4)))
    bad = np.zeros((3, 3))
    bad[1, 2] = np.nan
    with pytest.raises(ValueError):
        chu_liu_edmonds(bad)


def test_long_sentences_are_trees_even_when_every_word_wants_root() -> None:
    rng = np.random.default_rng(1)
    random = rng.standard_normal((501, 501))
    root_loving = random.copy()
    root_loving[:, 0] += 10.0  # 500 root children before the root constraint is enforced
    for S in (random, root_loving, np.zeros((501, 501))):
        heads = chu_liu_edmonds(S)
        assert len(heads) == 500 and is_tree(heads)


def test_longer_sentences_against_ufal_with_one_root_arc_allowed() -> None:
    """An exact reference beyond brute force: the best single-rooted tree is the best, over root words r, of
    the unconstrained maximum arborescence (ufal's C++ decoder) with ROOT -> r as the only root arc."""
    ufal = pytest.importorskip("ufal.chu_liu_edmonds")
    rng = np.random.default_rng(2)
    for n in (9, 20, 35):
        for scale in (1.0, 4.0):
            S = torch.log_softmax(torch.tensor(rng.standard_normal((n + 1, n + 1)) * scale), dim=1).numpy()
            best = -np.inf
            for r in range(1, n + 1):
                prepared = S.copy()
                np.fill_diagonal(prepared, np.nan)
                prepared[0] = np.nan
                prepared[1:, 0] = np.nan
                prepared[r, 0] = S[r, 0]
                best = max(best, key_of(S, ufal.chu_liu_edmonds(prepared)[0][1:])[1])
            heads = chu_liu_edmonds(S)
            assert is_tree(heads)
            assert key_of(S, heads)[1] == pytest.approx(best, abs=1e-9)
