"""Constituency trees as nltk Trees, and their spans.

Two kinds of tree share one type, ``nltk.Tree``:
- *labelled* (PTB gold): internal nodes carry phrase labels, preterminals ``Tree(tag, [word])`` carry tags;
- *unlabelled* (model output): every internal node has the label ``""`` and leaves are the words themselves.
A span is ``(start, end)`` over 0-based word positions, end exclusive; a labelled span adds the label.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nltk import Tree


def nltk_tree() -> type[Tree]:
    """nltk's ``Tree``, imported where trees are made or walked: ``import nltk`` loads the whole toolkit (and
    scipy, where installed: about 0.8 s and 80 MB), which training and dependency parsing never need."""
    from nltk import Tree

    return Tree


def is_preterminal(node: Tree) -> bool:
    """A PTB preterminal: a non-empty label over exactly one word."""
    return node.label() != "" and len(node) == 1 and isinstance(node[0], str)


def tree_tags(tree: Tree) -> list[str | None]:
    """The preterminal tag above each word, None for words directly under a phrase (unlabelled trees)."""
    tags: list[str | None] = []
    Tree = nltk_tree()  # noqa: N806

    def walk(node: Tree) -> None:
        if is_preterminal(node):
            tags.append(node.label())
            return
        for child in node:
            if isinstance(child, Tree):
                walk(child)
            else:
                tags.append(None)

    walk(tree)
    return tags


def labelled_spans(tree: Tree) -> list[tuple[str, int, int]]:
    """(label, start, end) of every phrase node (preterminals excluded), in pre-order; duplicates kept."""
    out: list[tuple[str, int, int]] = []
    Tree = nltk_tree()  # noqa: N806

    def walk(node: Tree, start: int) -> int:
        if is_preterminal(node):
            return start + 1
        pos = start
        for child in node:
            pos = walk(child, pos) if isinstance(child, Tree) else pos + 1
        out.append((node.label(), start, pos))
        return pos

    walk(tree, 0)
    return out


def restrict_spans(
    spans: Iterable[tuple[str, int, int]], keep: Sequence[bool]
) -> list[tuple[str, int, int]]:
    """Project labelled spans onto the kept positions, renumbered; empty projections are dropped.

    Removing punctuation this way deletes constituents that held only punctuation and turns unary chains into
    repeated spans, which set comparison collapses — the protocol's gold-tree clean-up.
    """
    prefix = [0]
    for k in keep:
        prefix.append(prefix[-1] + (1 if k else 0))
    out = []
    for label, start, end in spans:
        a, b = prefix[start], prefix[end]
        if b > a:
            out.append((label, a, b))
    return out


def scored_spans(spans: Iterable[tuple[str, int, int]], length: int) -> set[tuple[int, int]]:
    """The unlabelled span set UF1 compares: length-1 spans and the whole-sentence span excluded."""
    return {(a, b) for _, a, b in spans if b - a > 1 and not (a == 0 and b == length)}


def spans_to_tree(words: Sequence[str], spans: Iterable[tuple[int, int]]) -> Tree:
    """Build an unlabelled tree from a laminar (non-crossing) span set; the whole sentence is always a node."""
    n = len(words)
    chosen = sorted({(a, b) for a, b in spans if b - a > 1 and (a, b) != (0, n)}, key=lambda s: (s[0], -s[1]))
    Tree = nltk_tree()  # noqa: N806

    def build(a: int, b: int, inner: list[tuple[int, int]]) -> Tree:
        children: list[Tree | str] = []
        pos = a
        k = 0
        while pos < b:
            if k < len(inner) and inner[k][0] == pos:
                s, e = inner[k]
                k += 1
                nested = []
                while k < len(inner) and inner[k][1] <= e:
                    nested.append(inner[k])
                    k += 1
                children.append(build(s, e, nested))
                pos = e
            else:
                children.append(words[pos])
                pos += 1
        return Tree("", children)

    return build(0, n, chosen)


def display_tree(tree: Tree, tags: Sequence[str | None] | None = None) -> Tree:
    """A copy for nltk's ``pretty_print``/``draw``: every bare word under a preterminal (its tag, else ``X``) and
    every unlabelled phrase labelled ``X``, because nltk's printer moves a word that sits beside a phrase out of
    word order and prints empty labels as nothing."""
    Tree = nltk_tree()  # noqa: N806
    position = 0

    def copy(node: Tree) -> Tree:
        nonlocal position
        if is_preterminal(node):
            position += 1
            return Tree(node.label() or "X", [node[0]])
        children = []
        for child in node:
            if isinstance(child, str):
                tag = tags[position] if tags is not None and position < len(tags) else None
                children.append(Tree(tag if tag not in (None, "", "_") else "X", [child]))
                position += 1
            else:
                children.append(copy(child))
        return Tree(node.label() or "X", children)

    return copy(tree)


def binary_tree_from_distances(words: Sequence[str], distances: Sequence[float]) -> Tree:
    """Top-down split at the largest distance (``distances[i]`` separates words i and i+1).

    Ties go to the leftmost maximum, so equal distances binarise left to right: the rule PRPN's parser relies
    on (:func:`word_depths_to_split_distances`).  StructFormer's authors split at every tied maximum at once
    instead (:func:`nary_tree_from_distances`); the two trees are the same whenever no span's largest distance
    is tied.
    """
    def leftmost_maximum(a: int, b: int) -> list[int]:
        return [max(range(a, b - 1), key=lambda i: (distances[i], -i)) + 1]

    return _split_top_down(words, distances, leftmost_maximum)


def nary_tree_from_distances(words: Sequence[str], distances: Sequence[float]) -> Tree:
    """Top-down split at *every* largest distance of a span at once (``distances[i]`` separates words i and
    i+1), so k tied maxima give a node with k+1 children; each child is split the same way.

    StructFormer's authors' ``build_tree`` (with its default gap 0), which compares the distances exactly: only
    equal values tie.
    """
    def every_maximum(a: int, b: int) -> list[int]:
        top = max(distances[a : b - 1])
        return [i + 1 for i in range(a, b - 1) if distances[i] == top]

    return _split_top_down(words, distances, every_maximum)


def _split_top_down(words: Sequence[str], distances: Sequence[float],
                    cuts: Callable[[int, int], list[int]]) -> Tree:
    """The tree of spans found by cutting [0, n) at ``cuts(a, b)`` and each piece again, top down.  Iterative
    so 500-word sentences do not hit the recursion limit."""
    n = len(words)
    if len(distances) != max(n - 1, 0):
        raise ValueError(f"{len(distances)} distances for {n} words; expected {max(n - 1, 0)}")
    if n == 0:
        return nltk_tree()("", [])
    spans: list[tuple[int, int]] = []
    stack = [(0, n)]
    while stack:
        a, b = stack.pop()
        if b - a < 2:
            continue
        spans.append((a, b))
        at = cuts(a, b)
        stack.extend(zip([a, *at], [*at, b]))
    return spans_to_tree(words, spans)


def word_depths_to_split_distances(depths: Sequence[float]) -> list[float]:
    """PRPN's parser (its appendix A) as split distances for :func:`binary_tree_from_distances`.

    PRPN gives every word w_k a depth (its syntactic distance to the word before it) and parses top-down: split
    at the deepest word k into ``(w_<k) (w_k (w_>k))`` and recurse on both sides, ties going to the leftmost
    word.  Splitting between words j and j+1 at ``max(depth_j, depth_(j+1))`` builds exactly that tree with the
    shared leftmost-maximum splitter: the deepest word's two neighbouring gaps tie for the maximum, the left gap
    goes first and the right one next, which detaches the word from what follows it.
    """
    return [max(a, b) for a, b in zip(depths[:-1], depths[1:])]
