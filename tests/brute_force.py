"""Brute-force enumeration of dependency trees, the reference the decoder tests compare against (n <= 7)."""

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
