"""Where things go, for both the SVG figures and the terminal view: text widths in cells, arc levels so that
nested arcs never cross, rows for spans, a tree's phrases and a figure's caption."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from nltk import Tree

from depinduce.pictures.compare import Marks, unscored_mask
from depinduce.structures.sentence import Sentence
from depinduce.structures.spans import is_preterminal


def display_width(text: str) -> int:
    """Terminal cells (and, scaled, drawing width) of ``text``: wide East Asian characters count two, combining
    marks none."""
    width = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def arc_levels(spans: Sequence[tuple[int, int]]) -> list[int]:
    """A level (1 = lowest) for each span so that an arc is drawn above every arc it covers.

    Shorter spans are placed first; each goes one above the highest already placed span inside it (an equal span
    counts as inside, so two arcs over the same words stack)."""
    order = sorted(range(len(spans)), key=lambda k: (spans[k][1] - spans[k][0], spans[k][0]))
    levels = [0] * len(spans)
    placed: list[int] = []
    for k in order:
        a, b = spans[k]
        inner = [levels[j] for j in placed if a <= spans[j][0] and spans[j][1] <= b]
        levels[k] = 1 + max(inner, default=0)
        placed.append(k)
    return levels


@dataclass(frozen=True)
class Arc:
    """One arc to draw: head (0 = root) → dependent (1-based), and how it is styled."""

    head: int
    dep: int
    label: str | None
    classes: str  # "arc", plus "punct", "wrong", "gold", "wrong-label"


def arcs_to_draw(sentence: Sentence, marks: Marks | None = None) -> list[Arc]:
    """The predicted arcs, then (in gold mode) the gold arc of every word whose predicted head is wrong."""
    if sentence.heads is None:
        return []
    punct = unscored_mask(sentence, marks)
    arcs: list[Arc] = []
    for i, head in enumerate(sentence.heads, start=1):
        classes = ["arc"]
        if punct[i - 1]:
            classes.append("punct")
        if marks is not None and i in marks.wrong_heads:
            classes.append("wrong")
        if marks is not None and i in marks.wrong_labels:
            classes.append("wrong-label")
        label = sentence.deprels[i - 1] if sentence.deprels is not None else None
        arcs.append(Arc(head, i, label, " ".join(classes)))
    if marks is not None and marks.gold_heads is not None:
        for i in sorted(marks.wrong_heads):
            label = marks.gold_deprels[i - 1] if marks.gold_deprels is not None else None
            arcs.append(Arc(marks.gold_heads[i - 1], i, label, "arc gold"))
    return arcs


def pack_rows(spans: Sequence[tuple[int, int]]) -> list[int]:
    """A row (0 = first) for each half-open word span so that spans in one row never overlap; shorter first."""
    rows: list[list[tuple[int, int]]] = []
    out = [0] * len(spans)
    for k in sorted(range(len(spans)), key=lambda k: (spans[k][1] - spans[k][0], spans[k][0])):
        a, b = spans[k]
        row = next((r for r, taken in enumerate(rows) if all(b <= s or e <= a for s, e in taken)), None)
        if row is None:
            rows.append([])
            row = len(rows) - 1
        rows[row].append((a, b))
        out[k] = row
    return out


def phrases(tree: Tree) -> list[tuple[str, int, int, int]]:
    """(label, start, end, height) of every phrase node: preterminals and words are height 0."""
    out: list[tuple[str, int, int, int]] = []

    def walk(node: Tree | str, start: int) -> tuple[int, int]:
        if not isinstance(node, Tree) or is_preterminal(node):
            return start + 1, 0
        pos, height = start, 0
        for child in node:
            pos, child_height = walk(child, pos)
            height = max(height, child_height)
        out.append((node.label(), start, pos, height + 1))
        return pos, height + 1

    walk(tree, 0)
    return out


def caption(sentence: Sentence, ordinal: int, marks: Marks | None = None) -> str:
    """A figure's caption (plain text): its id and text, and in gold mode what is wrong."""
    ident = sentence.sent_id if sentence.sent_id is not None else str(ordinal)
    text = sentence.text if sentence.text else " ".join(sentence.words)
    out = f"{ident}: {text}"
    if marks is not None:
        notes = []
        if marks.gold_heads is not None and sentence.heads is not None:
            notes.append(f"{len(marks.wrong_heads)} of {marks.scored} heads wrong")
        if marks.wrong_labels:
            notes.append(f"{len(marks.wrong_labels)} labels wrong")
        if marks.missing_spans:
            notes.append(f"{len(marks.missing_spans)} gold spans missing")
        if notes:
            out += f" ({'; '.join(notes)})"
    return out
