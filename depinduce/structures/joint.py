"""StructFormer's joint parse: syntactic distances + heights -> a dependency tree (appendix A.1, Algorithm 3).

The paper's recursive BuildTree splits a span at its largest distance (``distances[i]`` separates words i
and i+1, 0-based), builds both halves, and links their parents: when ``height(parent_l) > height(parent_r)``
the right parent depends on the left one and the left parent heads the span, otherwise the left parent
depends on the right one.  The last remaining parent is attached to ROOT, so the result is always a single-
rooted, projective tree whose constituents are exactly the binary tree of the same distances.

Tie rules, stated because the paper leaves them implicit:
- equal distances: the **leftmost** maximum splits first (``argmax`` convention, the same rule as
  :func:`depinduce.structures.spans.binary_tree_from_distances`, so the dependency tree and the constituency
  tree agree);
- equal heights: the comparison is strict, so the **right** parent wins a tie.  By induction the head of every
  constituent is its rightmost word of maximal height, and the root is the rightmost highest word.

Instead of recursing (500-word sentences would overflow Python's stack) the splits are replayed bottom-up:
merging adjacent spans in increasing order of (distance, -position) rebuilds exactly the top-down tree, since
top-down always splits at the largest such key.  That is O(n log n) and needs no recursion.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def dependency_from_distances(distances: Sequence[float] | Any, heights: Sequence[float] | Any) -> list[int]:
    """Heads (1-based, 0 = ROOT) from n-1 split distances and n word heights (lists, arrays or tensors)."""
    d = _as_floats(distances, "distances")
    h = _as_floats(heights, "heights")
    n = len(h)
    if len(d) != max(n - 1, 0):
        raise ValueError(f"{len(d)} distances for {n} words; expected {max(n - 1, 0)}")
    if n == 0:
        return []
    heads = [0] * n
    # Spans are contiguous, so a span is known by its two ends: start_of[end] and end_of[start].
    start_of = list(range(n))
    end_of = list(range(n))
    span_head = list(range(n))  # indexed by the span's start (0-based word positions)
    for k in sorted(range(n - 1), key=lambda i: (d[i], -i)):
        left_start = start_of[k]
        right_end = end_of[k + 1]
        left, right = span_head[left_start], span_head[k + 1]
        if h[left] > h[right]:
            heads[right] = left + 1
            winner = left
        else:
            heads[left] = right + 1
            winner = right
        end_of[left_start] = right_end
        start_of[right_end] = left_start
        span_head[left_start] = winner
    return heads


def _as_floats(values: Sequence[float] | Any, name: str) -> list[float]:
    if hasattr(values, "detach"):
        values = values.detach().cpu()
    if hasattr(values, "tolist"):
        values = values.tolist()
    out = [float(v) for v in values]
    if any(math.isnan(v) for v in out):
        raise ValueError(f"{name} contain NaN")
    return out
