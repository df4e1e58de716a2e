"""One sentence's scores as a backend gives them to the parse pipeline: its own module so that the input views
(:mod:`depinduce.models.views`) and the backend base (:mod:`depinduce.models.base`) both name it without importing
each other."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass
class ParseScores:
    """A backend's output for one sentence of n words (punctuation already hidden).

    ``heads``: (n+1)×(n+1) log-probabilities (or any scores), row = dependent, column = head, column 0 = ROOT;
    row 0 is unused.  ``distances``: n−1 split scores, ``distances[i]`` between words i and i+1 (larger = split
    higher).  ``heights``: n word heights (StructFormer's root choice).  Any may be None when the backend does
    not produce it; ``capabilities`` says which are present.
    """

    heads: torch.Tensor | None = None
    distances: torch.Tensor | None = None
    heights: torch.Tensor | None = None
    # (n+1)×(n+1)×L label scores of each (dependent, head) pair, and the L label names: labels are chosen after
    # the decoder has chosen the heads, so every decoder gets labelled trees.
    labels: torch.Tensor | None = None
    label_names: Sequence[str] | None = None
    # A tree the backend decides without scores (the fixed baselines): n heads, 0 = ROOT.  Every decoder would
    # return it, so the pipeline takes it as is and no (n+1)×(n+1) matrix is ever built — any length parses.
    fixed_heads: Sequence[int] | None = None
    # How the constituency tree from ``distances`` treats tied maxima: False splits at the leftmost one
    # (binary trees); True splits at all of them at once (n-ary nodes, StructFormer's authors' ``build_tree``).
    split_ties: bool = False
