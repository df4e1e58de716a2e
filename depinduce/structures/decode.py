"""Turn head-score matrices into heads: one entry point for every decoder.

All decoders take the package's score convention, an (n+1)x(n+1) matrix (torch tensor, numpy array or
nested lists) with ``scores[d, h]`` the score of word d taking head h, column 0 = ROOT, row 0 and the diagonal
ignored, and return heads as a list of n ints (1-based, 0 = ROOT).

- ``mst``: the best single-rooted spanning tree (Chu-Liu/Edmonds with the root constraint); any tree shape.
- ``eisner``: the best projective single-rooted tree; batched across sentences by ``decode_batch``.
- ``argmax``: each word's best head on its own.  Fast and what some papers report, but **not necessarily a
  tree**: it can produce cycles and several (or no) words attached to ROOT.  The metrics still score it and
  report the share of well-formed trees.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from depinduce.errors import UsageError
from depinduce.structures.decoder_names import DECODERS
from depinduce.structures.eisner import eisner_batch, eisner_single
from depinduce.structures.mst import chu_liu_edmonds


def argmax_heads(scores: Any, root: int | None = None) -> list[int]:
    """Each word's highest-scoring head, the diagonal excluded; ties go to the lowest position (ROOT first).

    With ``root`` (1-based), that word is the only root and every other word takes its best *word* head — the
    StructFormer paper's decoder, whose root is the word with the greatest height.  The result may not be a tree
    (cycles; without ``root`` also several or no root words).  NaN scores are rejected.
    """
    if hasattr(scores, "detach"):
        scores = scores.detach().cpu().numpy()
    S = np.array(scores, dtype=np.float64, order="C")
    if S.ndim != 2 or S.shape[0] != S.shape[1] or S.shape[0] == 0:
        raise ValueError(f"expected an (n+1)x(n+1) score matrix, got shape {tuple(S.shape)}")
    if S.shape[0] == 1:
        return []
    body = S[1:]
    if np.isnan(body).any():
        raise ValueError("score matrix contains NaN")
    N = S.shape[0]
    S.reshape(-1)[:: N + 1] = -np.inf
    if root is None:
        return body.argmax(axis=1).tolist()
    if not 1 <= root < N:
        raise ValueError(f"root {root} is outside 1..{N - 1}")
    heads: list[int] = (body[:, 1:].argmax(axis=1) + 1).tolist() if N > 2 else [0]
    heads[root - 1] = 0
    return heads


def _check_method(method: str) -> None:
    if method not in DECODERS:
        raise UsageError(f"unknown decoder {method!r}; choose one of {', '.join(DECODERS)}")


def decode_heads(scores: Any, method: str = "mst") -> list[int]:
    """Heads for one sentence with the chosen decoder (``mst``, ``eisner`` or ``argmax``)."""
    _check_method(method)
    if method == "mst":
        return chu_liu_edmonds(scores)
    if method == "eisner":
        return eisner_single(scores)
    return argmax_heads(scores)


def decode_batch(
    matrices: Sequence[Any], method: str = "mst", roots: Sequence[int | None] | None = None
) -> list[list[int]]:
    """Heads for many sentences; Eisner runs as padded batches of similar lengths, the others one by one.

    ``roots`` (argmax only) fixes each sentence's root word, as :func:`argmax_heads` describes.
    """
    _check_method(method)
    if method == "eisner":
        return eisner_batch(matrices)
    if method == "mst":
        return [chu_liu_edmonds(m) for m in matrices]
    roots = roots if roots is not None else [None] * len(matrices)
    return [argmax_heads(m, root) for m, root in zip(matrices, roots)]
