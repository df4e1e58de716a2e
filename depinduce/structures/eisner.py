"""Eisner's algorithm: the best projective dependency tree with exactly one word attached to ROOT, batched.

Score matrices follow the package convention (``scores[b, d, h]``: word d takes head h; column 0 is ROOT,
row 0 and the diagonal are ignored).  Sentence b uses only positions 0..lengths[b], so a batch is simply the
score matrices padded to the longest sentence; the padding may hold anything.

The chart is the shared one of :mod:`depinduce.structures.projective` (one tensor operation per span width
for the whole batch, single root) in the max semiring with back-pointers; the tree is read off the split
tables.  Scores are moved to the CPU (decoding is sequential and cheap next to the model).

Forbidden arcs (``-inf``) get a finite score so low that a tree with fewer forbidden arcs always wins
(``min - (n * (max - min) + 1)`` per sentence), so a forbidden arc is chosen only when every projective tree
needs one.  The chart is computed in float64 so those large penalties do not swamp ordinary score differences.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from depinduce.structures.projective import eisner_chart
from depinduce.structures.semirings import MAX

_NEG = float("-inf")


def eisner(scores: Any, lengths: Any) -> list[list[int]]:
    """Best projective single-rooted trees for a batch: heads (1-based, 0 = ROOT) per sentence.

    ``scores``: (B, N+1, N+1) tensor or array; ``lengths``: B sentence lengths, each at most N.
    """
    with _one_thread():
        chart_scores, lengths_list = _prepare(scores, lengths)
        if chart_scores.shape[1] == 1 or max(lengths_list, default=0) == 0:
            return [[] for _ in lengths_list]
        split_in, split_right, split_left = _fill_chart(chart_scores)
    return [
        _backtrack(split_in[b], split_right[b], split_left[b], length) if length else []
        for b, length in enumerate(lengths_list)
    ]


@contextmanager
def _one_thread() -> Iterator[None]:
    """Run the chart on one intra-op thread, restoring the setting afterwards.

    The chart is thousands of small reductions; torch parallelises even tiny ones over its thread pool, and on
    a busy machine (other processes on the cores) each parallel region can then wait milliseconds for a
    descheduled thread: a maximum over a (5, 8, 3) tensor took 10-30 ms in our measurements.  One thread
    costs little here and removes that failure mode.  (The setting is process-wide while the chart runs.)
    """
    threads = torch.get_num_threads()
    if threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def eisner_single(scores: Any) -> list[int]:
    """Best projective single-rooted tree for one (n+1)x(n+1) score matrix."""
    matrix = _as_matrix(scores)
    return eisner(matrix.unsqueeze(0), [matrix.shape[0] - 1])[0]


def _as_matrix(scores: Any) -> torch.Tensor:
    matrix = scores if isinstance(scores, torch.Tensor) else torch.as_tensor(np.asarray(scores, dtype=np.float64))
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] == 0:
        raise ValueError(f"expected an (n+1)x(n+1) score matrix, got shape {tuple(matrix.shape)}")
    return matrix


def _prepare(scores: Any, lengths: Any) -> tuple[torch.Tensor, list[int]]:
    """A float64 copy with padding neutralised, row 0 forbidden and -inf replaced per sentence."""
    if not isinstance(scores, torch.Tensor):
        scores = torch.as_tensor(np.asarray(scores, dtype=np.float64))
    S = scores.detach().to(device="cpu", dtype=torch.float64)  # torch.where below makes the working copy
    if S.dim() != 3 or S.shape[1] != S.shape[2] or S.shape[1] == 0:
        raise ValueError(f"expected a (B, N+1, N+1) score tensor, got shape {tuple(S.shape)}")
    B, M, _ = S.shape
    lengths_list = [int(x) for x in (lengths.tolist() if hasattr(lengths, "tolist") else lengths)]
    if len(lengths_list) != B:
        raise ValueError(f"{len(lengths_list)} lengths for a batch of {B} score matrices")
    for length in lengths_list:
        if not 0 <= length < M:
            raise ValueError(f"sentence length {length} does not fit a {M}x{M} score matrix")
    length_t = torch.tensor(lengths_list, dtype=torch.long).view(B, 1, 1)
    pos = torch.arange(M)
    valid = (
        (pos.view(1, M, 1) >= 1)
        & (pos.view(1, M, 1) <= length_t)
        & (pos.view(1, 1, M) <= length_t)
        & (pos.view(M, 1) != pos.view(1, M))
    )
    if bool((valid & ~(S < float("inf"))).any()):
        raise ValueError("score matrix contains NaN or +inf")
    forbidden = valid & (S == _NEG)
    if bool(forbidden.any()):
        finite = valid & ~forbidden
        top = torch.where(finite, S, torch.tensor(_NEG, dtype=S.dtype)).amax(dim=(1, 2))
        low = torch.where(finite, S, torch.tensor(float("inf"), dtype=S.dtype)).amin(dim=(1, 2))
        spread = torch.where(torch.isfinite(top), top - low, torch.zeros_like(top))
        base = torch.where(torch.isfinite(low), low, torch.zeros_like(low))
        penalty = base - (length_t.view(B).to(S.dtype) * spread + 1.0)
        S = torch.where(forbidden, penalty.view(B, 1, 1), S)
    S = torch.where(valid, S, torch.zeros((), dtype=S.dtype))
    S[:, 0, :] = _NEG  # ROOT is never a dependent
    return S, lengths_list


def _fill_chart(S: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The shared chart (:func:`~depinduce.structures.projective.eisner_chart`) in the max semiring; returns its
    split-point tables indexed [b, width, start]."""
    chart = eisner_chart(S, MAX, backpointers=True)
    assert chart.split_in is not None and chart.split_right is not None and chart.split_left is not None
    return chart.split_in.numpy(), chart.split_right.numpy(), chart.split_left.numpy()


def _backtrack(split_in: np.ndarray, split_right: np.ndarray, split_left: np.ndarray, length: int) -> list[int]:
    """Read the heads of one sentence off its split tables (iterative: safe for long sentences)."""
    heads = [0] * (length + 1)
    # (kind, i, j): 0 complete right, 1 complete left, 2 incomplete i -> j, 3 incomplete j -> i
    stack: list[tuple[int, int, int]] = [(0, 0, length)]
    while stack:
        kind, i, j = stack.pop()
        if i == j:
            continue
        w = j - i
        if kind == 0:
            k = i + 1 + int(split_right[w, i])
            stack.append((2, i, k))
            stack.append((0, k, j))
        elif kind == 1:
            k = i + int(split_left[w, i])
            stack.append((1, i, k))
            stack.append((3, k, j))
        else:
            if kind == 2:
                heads[j] = i
            else:
                heads[i] = j
            k = i + int(split_in[w, i])
            stack.append((0, i, k))
            stack.append((1, k + 1, j))
    return heads[1:]


def eisner_batch(matrices: Sequence[Any], max_cells: int = 1_000_000) -> list[list[int]]:
    """Decode (n_b+1)x(n_b+1) matrices of different sizes, in padded batches of similar lengths.

    Sentences are sorted by length and cut into batches of at most ``max_cells`` chart cells (batch size x
    (N+1)^2), which bounds memory (about 100 bytes per cell) and keeps padding small.
    """
    tensors = [_as_matrix(m) for m in matrices]
    order = sorted(range(len(tensors)), key=lambda k: tensors[k].shape[0])
    out: list[list[int]] = [[] for _ in tensors]
    start = 0
    while start < len(order):
        stop = start + 1
        while stop < len(order) and (stop + 1 - start) * tensors[order[stop]].shape[0] ** 2 <= max_cells:
            stop += 1
        chunk = order[start:stop]
        M = tensors[chunk[-1]].shape[0]
        batch = torch.zeros((len(chunk), M, M), dtype=torch.float64)
        for b, k in enumerate(chunk):
            size = tensors[k].shape[0]
            batch[b, :size, :size] = tensors[k].detach().to(device="cpu", dtype=torch.float64)
        for k, heads in zip(chunk, eisner(batch, [tensors[k].shape[0] - 1 for k in chunk])):
            out[k] = heads
        start = stop
    return out
