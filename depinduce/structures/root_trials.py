"""The best single-rooted tree found by trying every word as the root in turn, the leftmost root winning ties.

Some authors' decoders (UDGN's ``dms``) enforce one root this way: for each word r, left to right, every root arc
but r's is removed, the maximum spanning tree is found, and the best of those n trees is kept, replaced only by a
strictly better one.  Every single-rooted tree is a candidate of exactly one trial, so the optimum is the one
:func:`~depinduce.structures.mst.chu_liu_edmonds` finds in a single run; what the trials add is their tie rule
(among equally good trees with different roots, the leftmost root wins), for n times the work (about 4 ms for a
25-word sentence).  Ties between trees with the same root follow depinduce's Chu-Liu/Edmonds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from depinduce.structures.mst import chu_liu_edmonds


def tree_over_root_trials(scores: Any) -> list[int]:
    """Heads (1-based, 0 = ROOT) of the best tree with exactly one word on ROOT for an (n+1)x(n+1) score
    matrix (``scores[d, h]``, column 0 = ROOT, row 0 and the diagonal ignored): each word r in turn is the only
    root (its score ``scores[r, 0]``), and the first of the best-scoring trials wins.  ``scores`` may be a torch
    tensor, a numpy array or nested lists; it is never modified."""
    if hasattr(scores, "detach"):  # torch tensor: avoid importing torch here
        scores = scores.detach().cpu().numpy()
    S = np.array(scores, dtype=np.float64)
    if S.ndim != 2 or S.shape[0] != S.shape[1] or S.shape[0] == 0:
        raise ValueError(f"expected an (n+1)x(n+1) score matrix, got shape {tuple(S.shape)}")
    n = S.shape[0] - 1
    if n <= 1:
        return [0] * n
    words = np.arange(1, n + 1)
    best_score, best_tree = -np.inf, None
    trial = S.copy()
    for root in range(1, n + 1):
        trial[1:, 0] = -np.inf
        trial[root, 0] = S[root, 0]
        tree = chu_liu_edmonds(trial, single_root=True)
        score = float(S[words, tree].sum())
        if best_tree is None or score > best_score:
            best_score, best_tree = score, tree
    assert best_tree is not None
    return best_tree
