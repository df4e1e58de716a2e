"""The decoder dispatcher: argmax semantics, method selection, batching, and long sentences."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from depinduce.errors import DepinduceError
from depinduce.structures.decode import DECODERS, argmax_heads, decode_batch, decode_heads
from depinduce.structures.dependency import is_projective, is_tree
from depinduce.structures.eisner import eisner_single
from depinduce.structures.mst import chu_liu_edmonds


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 12), seed=st.integers(0, 2**32 - 1), ties=st.booleans())
def test_argmax_picks_each_rows_maximum_off_the_diagonal(n: int, seed: int, ties: bool) -> None:
    rng = np.random.default_rng(seed)
    S = rng.integers(-2, 3, size=(n + 1, n + 1)).astype(float) if ties else rng.standard_normal((n + 1, n + 1))
    np.fill_diagonal(S, 100.0)  # the diagonal is never an arc, however high
    heads = argmax_heads(S)
    assert len(heads) == n
    for i, h in enumerate(heads, start=1):
        assert h != i
        others = [S[i, j] for j in range(n + 1) if j != i]
        assert S[i, h] == max(others)
        assert h == min(j for j in range(n + 1) if j != i and S[i, j] == max(others))  # ties: lowest position


def test_argmax_can_return_a_non_tree() -> None:
    S = np.zeros((4, 4))
    S[1, 2] = S[2, 1] = 5.0  # words 1 and 2 prefer each other: a cycle
    S[3, 0] = 5.0
    heads = argmax_heads(S)
    assert heads == [2, 1, 0]
    assert not is_tree(heads)
    assert is_tree(decode_heads(S, "mst"))


def test_argmax_rejects_nan_and_handles_tiny_input() -> None:
    assert argmax_heads(np.zeros((1, 1))) == []
    assert argmax_heads(torch.zeros(2, 2)) == [0]
    S = np.zeros((3, 3))
    S[2, 1] = np.nan
    with pytest.raises(ValueError):
        argmax_heads(S)


def test_dispatcher_uses_the_named_decoder() -> None:
    rng = np.random.default_rng(0)
    S = rng.standard_normal((9, 9))
    assert decode_heads(S, "mst") == chu_liu_edmonds(S)
    assert decode_heads(S, "eisner") == eisner_single(S)
    assert decode_heads(S, "argmax") == argmax_heads(S)
    assert DECODERS == ("mst", "eisner", "argmax")
    with pytest.raises(DepinduceError, match="unknown decoder"):
        decode_heads(S, "cky")
    with pytest.raises(DepinduceError):
        decode_batch([S], "greedy")


@pytest.mark.parametrize("method", DECODERS)
def test_batch_matches_one_by_one(method: str) -> None:
    rng = np.random.default_rng(1)
    matrices = [rng.standard_normal((n + 1, n + 1)) for n in (4, 1, 9, 0, 6, 6)]
    matrices[2] = torch.tensor(matrices[2], dtype=torch.float32)
    assert decode_batch(matrices, method) == [decode_heads(m, method) for m in matrices]
    assert decode_batch([], method) == []


def test_five_hundred_words_with_every_decoder() -> None:
    rng = np.random.default_rng(2)
    S = torch.log_softmax(torch.tensor(rng.standard_normal((501, 501))), dim=1)
    mst = decode_heads(S, "mst")
    eisner = decode_heads(S, "eisner")
    argmax = decode_heads(S, "argmax")
    assert len(mst) == len(eisner) == len(argmax) == 500
    assert is_tree(mst)
    assert is_tree(eisner) and is_projective(eisner)
    score = lambda heads: float(sum(S[i, h] for i, h in enumerate(heads, start=1)))  # noqa: E731
    assert score(argmax) >= score(mst) >= score(eisner)  # each decoder searches a smaller set of structures


def test_argmax_with_a_fixed_root_is_the_structformer_decoder() -> None:
    # word 2 is the highest word: it becomes the root even though word 1 scores ROOT best
    scores = [[0, 0, 0, 0], [0, 0, 5, 1], [0, 9, 0, 2], [0, 1, 7, 0]]
    scores[1][0] = 10.0
    assert argmax_heads(scores) == [0, 1, 2]
    assert argmax_heads(scores, root=2) == [2, 0, 2]
    assert decode_batch([scores, scores], "argmax", roots=[2, None]) == [[2, 0, 2], [0, 1, 2]]
