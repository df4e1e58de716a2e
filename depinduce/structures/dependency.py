"""Dependency trees as head lists, and the operations every reader, decoder and metric shares.

A dependency tree over n words is a list ``heads`` of length n where ``heads[i]`` is the 1-based position of
word i+1's head and 0 stands for ROOT (the CoNLL convention).
"""

from __future__ import annotations

from collections.abc import Sequence


def find_cycle(heads: Sequence[int]) -> list[int] | None:
    """Return the 1-based positions of one cycle, or None when following heads always reaches ROOT."""
    n = len(heads)
    state = [0] * (n + 1)  # 0 unvisited, 1 on the current path, 2 known to reach ROOT
    state[0] = 2
    for start in range(1, n + 1):
        path: list[int] = []
        node = start
        while state[node] == 0:
            state[node] = 1
            path.append(node)
            node = heads[node - 1]
            if not 0 <= node <= n:
                break
        if 0 <= node <= n and state[node] == 1:
            return path[path.index(node):]
        for p in path:
            state[p] = 2
    return None


def tree_problem(heads: Sequence[int]) -> str | None:
    """Why ``heads`` is not a single-rooted tree, or None when it is one."""
    n = len(heads)
    for i, h in enumerate(heads, start=1):
        if not 0 <= h <= n:
            return f"head {h} of word {i} is outside 0..{n}"
        if h == i:
            return f"word {i} is its own head"
    roots = [i for i, h in enumerate(heads, start=1) if h == 0]
    if n and len(roots) != 1:
        return f"{len(roots)} words attached to ROOT ({', '.join(map(str, roots[:5]))}); a tree has exactly one"
    cycle = find_cycle(heads)
    if cycle:
        return "cycle through words " + " -> ".join(map(str, cycle))
    return None


def is_tree(heads: Sequence[int]) -> bool:
    """True for a well-formed tree: heads in range, exactly one root, no cycle."""
    return tree_problem(heads) is None


def reattach(heads: Sequence[int], keep: Sequence[bool]) -> list[int]:
    """Restrict a tree to the kept words; a kept word whose head is removed goes to its nearest kept ancestor.

    Returns heads over the kept words only, renumbered (0 = ROOT).  This is the protocol's rule for removing
    punctuation from gold and predicted trees; it also works on non-trees (an argmax decode with a cycle): a walk
    that revisits another word ends at ROOT rather than looping, and a word whose walk returns to itself (a
    self-loop) keeps itself as head, which scores as wrong.
    """
    n = len(heads)
    new_index = [0] * (n + 1)
    count = 0
    for i in range(1, n + 1):
        if keep[i - 1]:
            count += 1
            new_index[i] = count
    out: list[int] = []
    for i in range(1, n + 1):
        if not keep[i - 1]:
            continue
        h = heads[i - 1]
        seen = {i}
        while h != 0 and not keep[h - 1]:
            if h in seen or not 0 < h <= n:
                h = 0
                break
            seen.add(h)
            h = heads[h - 1]
        # A word that heads itself — directly, or by a cycle through removed words — stays a self-loop: a wrong
        # head for every metric, never a root attachment (which it would otherwise score as).
        out.append(new_index[h] if 0 < h <= n else 0)
    return out


def attach_hidden(heads_kept: Sequence[int], hidden: Sequence[bool]) -> list[int]:
    """Put hidden tokens (punctuation the model never saw) back into a tree over the visible ones.

    The rule, fixed and documented in the README: a hidden token at the end of the sentence (nothing visible
    after it) attaches to the root word; any other hidden token attaches to the nearest visible word before it,
    or, at the start of the sentence, to the nearest visible word after it.  Hidden tokens are always leaves, so
    the result is a tree whenever ``heads_kept`` is one, and projective whenever it is projective.  When nothing
    is visible, the first token is the root and every other token attaches to it.
    """
    n = len(hidden)
    visible = [i for i in range(1, n + 1) if not hidden[i - 1]]
    if len(visible) != len(heads_kept):
        raise ValueError(f"{len(heads_kept)} heads for {len(visible)} visible tokens")
    if not visible:
        return [0] + [1] * (n - 1) if n else []
    heads = [0] * n
    for k, pos in enumerate(visible):
        h = heads_kept[k]
        heads[pos - 1] = visible[h - 1] if h else 0
    roots = [visible[k] for k, h in enumerate(heads_kept) if h == 0]
    root_word = roots[0] if roots else visible[-1]
    last_visible = visible[-1]
    prev_visible = 0
    for i in range(1, n + 1):
        if not hidden[i - 1]:
            prev_visible = i
            continue
        if i > last_visible:
            heads[i - 1] = root_word
        elif prev_visible:
            heads[i - 1] = prev_visible
        else:
            heads[i - 1] = visible[0]
    return heads


def subtree_spans(heads: Sequence[int]) -> list[tuple[int, int]]:
    """Spans [start, end) (0-based) covered by every word's subtree, for projective trees.

    Used to score dependency output with UF1 and to print a dependency parse as brackets.  Non-contiguous
    subtrees (non-projective trees) contribute their covering span.
    """
    n = len(heads)
    lo = list(range(n))
    hi = [i + 1 for i in range(n)]
    order = _bottom_up_order(heads)
    for i in order:
        h = heads[i] - 1
        if h >= 0:
            lo[h] = min(lo[h], lo[i])
            hi[h] = max(hi[h], hi[i])
    return sorted({(lo[i], hi[i]) for i in range(n)})


def _bottom_up_order(heads: Sequence[int]) -> list[int]:
    """0-based word indices ordered so that every word comes before its head (deepest first)."""
    n = len(heads)
    depth = [-1] * n
    for i in range(n):
        path = []
        node = i
        while node >= 0 and depth[node] < 0 and node not in path:
            path.append(node)
            node = heads[node] - 1
        base = depth[node] if node >= 0 and depth[node] >= 0 else 0
        for k, p in enumerate(reversed(path)):
            depth[p] = base + k + 1
    return sorted(range(n), key=lambda i: -depth[i])


def is_projective(heads: Sequence[int]) -> bool:
    """True when no two arcs cross (ROOT arcs included, ROOT at position 0)."""
    arcs = [(min(i, h), max(i, h)) for i, h in enumerate(heads, start=1)]
    for a, b in arcs:
        for c, d in arcs:
            if a < c < b < d:
                return False
    return True
