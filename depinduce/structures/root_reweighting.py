"""The best single-rooted tree by root reweighting: lower every ROOT arc by one constant, then take the best tree
with no root constraint.

Stanojević and Cohen (2021, "A Root of a Problem: Optimizing Single-Root Dependency Parsing") show that with
c = 1 + n·(max − min), the spread of the n dependents' scores, a tree with k > 1 words on ROOT loses at least
c − n·(max − min) > 0 to some tree with one word on ROOT, so the unconstrained maximum tree (Chu-Liu/Edmonds)
has exactly one root; and since every single-rooted tree pays c exactly once, it is the best single-rooted tree
of the original scores.  The optimum is therefore the one :func:`~depinduce.structures.mst.chu_liu_edmonds` finds
with the constraint; this module reproduces decoders written this way (the Probabilistic Transformer's
``evaluate.py``), whose ties between equally good trees follow the unconstrained search.

The spread is taken over the rows' finite entries, ROOT column and diagonal included as given (the authors'
matrices are probabilities with self-arcs at 0), and everything is computed in float64.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from depinduce.structures.mst import chu_liu_edmonds


def root_reweighting_constant(scores: Any) -> float:
    """c = 1 + n·(max − min) over the finite entries of rows 1..n of an (n+1)×(n+1) score matrix."""
    S = _as_array(scores)
    body = S[1:]
    finite = body[np.isfinite(body)]
    if finite.size == 0:
        return 1.0
    return 1.0 + (S.shape[0] - 1) * float(finite.max() - finite.min())


def root_reweighted_tree(scores: Any) -> list[int]:
    """Heads (1-based, 0 = ROOT) for an (n+1)×(n+1) score matrix (``scores[d, h]``, column 0 = ROOT, row 0
    unused): every ROOT arc lowered by :func:`root_reweighting_constant`, then the best tree without the root
    constraint.  ``scores`` may be a torch tensor, a numpy array or nested lists; it is never modified."""
    S = _as_array(scores).copy()
    if S.shape[0] <= 2:
        return [0] * (S.shape[0] - 1)
    S[1:, 0] -= root_reweighting_constant(S)
    return chu_liu_edmonds(S, single_root=False)


def _as_array(scores: Any) -> np.ndarray:
    if hasattr(scores, "detach"):  # torch tensor: avoid importing torch here
        scores = scores.detach().cpu().numpy()
    S = np.array(scores, dtype=np.float64)
    if S.ndim != 2 or S.shape[0] != S.shape[1] or S.shape[0] == 0:
        raise ValueError(f"expected an (n+1)x(n+1) score matrix, got shape {tuple(S.shape)}")
    return S
