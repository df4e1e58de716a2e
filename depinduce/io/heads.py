"""HEAD-column checks shared by the CoNLL-U, CoNLL-X and tabular readers, located to the offending line.

Heads outside 0..n can never be represented and are always an error.  Whether the heads must also form a
tree (one root, no cycle, no self-loop) is the caller's choice (``check_trees``): gold files must, but a
prediction file from an argmax decoder legitimately holds non-trees, and the metrics report their share.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from depinduce.errors import InputError
from depinduce.structures.dependency import find_cycle, tree_problem

_HEAD = re.compile(r"0|[1-9][0-9]*")


def parse_head(value: str, name: str, line: int) -> int | None:
    """A HEAD value as an int, None for ``_`` (unannotated); anything else is an InputError."""
    if value == "_":
        return None
    if not _HEAD.fullmatch(value):
        raise InputError(name, line, f"HEAD '{value}' is not a non-negative integer")
    return int(value)


def collect_heads(values: Sequence[int | None], lines: Sequence[int], name: str) -> list[int] | None:
    """All heads, or None when every word's HEAD is ``_`` (a sentence to be parsed); a mix is an error."""
    missing = [k for k, h in enumerate(values) if h is None]
    if not missing:
        return [h for h in values if h is not None]
    if len(missing) == len(values):
        return None
    raise InputError(name, lines[missing[0]], "HEAD is '_' although other words of the sentence have heads")


def check_heads(heads: Sequence[int], lines: Sequence[int], name: str, *, check_trees: bool) -> None:
    """Raise InputError at the first word line that breaks the head constraints.

    ``lines[i]`` is the line of word i+1.  With ``check_trees`` the heads must form a single-rooted tree:
    a second root is reported at its own line, a cycle at the line of its first word.
    """
    n = len(heads)
    for i, h in enumerate(heads):
        if not 0 <= h <= n:
            raise InputError(name, lines[i], f"HEAD {h} of word {i + 1} is outside 0..{n}")
    if not check_trees:
        return
    problem = tree_problem(heads)
    if problem is None:
        return
    roots = [i for i, h in enumerate(heads) if h == 0]
    self_loops = [i for i, h in enumerate(heads, start=1) if h == i]
    cycle = find_cycle(heads)
    if self_loops:
        where = lines[self_loops[0] - 1]
    elif len(roots) > 1:
        where = lines[roots[1]]
    elif cycle:
        where = lines[min(cycle) - 1]
    else:
        where = lines[0]
    raise InputError(name, where, f"not a tree: {problem}")
