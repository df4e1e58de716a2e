"""Brute-force enumeration of dependency trees (n <= 7) and binary bracketings (n <= 6), the references the chart
and decoder tests compare against."""

from __future__ import annotations

import functools

import numpy as np


@functools.lru_cache(maxsize=None)
def all_single_rooted_trees(n: int) -> np.ndarray:
    """Every head list over n words (rows, 0 = ROOT) that is a tree with exactly one root word."""
    grid = np.stack(np.meshgrid(*[np.arange(n + 1, dtype=np.int8)] * n, indexing="ij"), -1).reshape(-1, n)
    grid = grid[(grid == 0).sum(1) == 1]
    grid = grid[(grid != np.arange(1, n + 1, dtype=np.int8)).all(1)]
    # follow head pointers 2^3 >= n + 1 times: a tree is exactly what ends at ROOT from every word
    pointer = np.concatenate([np.zeros((len(grid), 1), np.int8), grid], 1)
    for _ in range(3):
        pointer = np.take_along_axis(pointer, pointer, 1)
    return grid[(pointer == 0).all(1)]


@functools.lru_cache(maxsize=None)
def projective_trees(n: int) -> np.ndarray:
    """The single-rooted trees whose arcs (ROOT arcs included) never cross."""
    grid = all_single_rooted_trees(n)
    dep = np.arange(1, n + 1)
    lo, hi = np.minimum(grid, dep), np.maximum(grid, dep)
    a, b = lo[:, :, None], hi[:, :, None]
    c, d = lo[:, None, :], hi[:, None, :]
    crossing = ((a < c) & (c < b) & (b < d)).any((1, 2))
    return grid[~crossing]


def best_key(S: np.ndarray, trees: np.ndarray) -> tuple[int, float]:
    """The decoders' objective over candidate trees: fewest forbidden arcs first, then the highest score."""
    arcs = S[np.arange(1, S.shape[0]), trees]
    forbidden = np.isneginf(arcs).sum(1)
    total = np.where(np.isneginf(arcs), 0.0, arcs).sum(1)
    fewest = forbidden.min()
    return int(fewest), float(total[forbidden == fewest].max())


@functools.lru_cache(maxsize=None)
def bracketings(i: int, j: int) -> tuple[tuple, ...]:
    """Every binary tree over words i..j−1 (j > i): ("leaf", i) or ("node", i, j, left, right)."""
    if j - i == 1:
        return (("leaf", i),)
    return tuple(("node", i, j, left, right) for k in range(i + 1, j)
                 for left in bracketings(i, k) for right in bracketings(k, j))


def tree_spans(tree: tuple) -> set[tuple[int, int]]:
    """The fencepost spans (i, j) of a tree's inner nodes: its spans of width ≥ 2."""
    if tree[0] == "leaf":
        return set()
    return {(tree[1], tree[2])} | tree_spans(tree[3]) | tree_spans(tree[4])


def bracketing_spans(n: int) -> list[frozenset[tuple[int, int]]]:
    """The spans of width ≥ 2 of every binary bracketing of n words (one empty bracketing below two words)."""
    if n < 2:
        return [frozenset()]
    return [frozenset(tree_spans(tree)) for tree in bracketings(0, n)]
