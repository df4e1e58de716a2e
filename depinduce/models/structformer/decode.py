"""The StructFormer paper's own dependency decoder (section 5.3, eq. 17).

Every word takes its most probable parent, k = argmax_{j ≠ i} P[i, j], except the word with the greatest
syntactic height, which becomes the root.  Nothing forces the result to be a tree (it may contain cycles), which
is why depinduce's default decoder for CoNLL-U output is MST over the same scores; this one exists to reproduce
the paper's numbers.
"""

from __future__ import annotations

import torch

from depinduce.models.base import ParseScores


def paper_dependency_heads(scores: ParseScores) -> list[int]:
    """Heads (1-based, 0 = ROOT) from ``scores.heads`` ((n+1)×(n+1) log P, column 0 = ROOT) and
    ``scores.heights`` (n): argmax over the word columns for every word, the highest word as the single root.

    Ties go to the leftmost candidate (``torch.argmax``'s rule), so the result is deterministic.
    """
    if scores.heads is None or scores.heights is None:
        raise ValueError("the paper's decoder needs head scores and heights")
    heads_matrix = scores.heads.detach().float().cpu()
    heights = scores.heights.detach().float().cpu()
    n = heights.numel()
    if heads_matrix.shape != (n + 1, n + 1):
        raise ValueError(f"head scores of shape {tuple(heads_matrix.shape)} do not fit {n} heights")
    if n == 0:
        return []
    arcs = heads_matrix[1:, 1:].clone()
    arcs.fill_diagonal_(float("-inf"))
    heads = (arcs.argmax(dim=1) + 1).tolist() if n > 1 else [0]
    heads[int(torch.argmax(heights))] = 0
    return heads
