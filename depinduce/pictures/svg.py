"""One sentence as an SVG figure: words on a baseline (UPOS under them), arcs above, the constituency tree below,
and in gold mode the wrong parts in red and the missing gold spans as bars (see :mod:`depinduce.pictures.figures`
for the picture as a whole and the writers)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from nltk import Tree

from depinduce.display import html_text
from depinduce.pictures.compare import Marks
from depinduce.pictures.layout import Arc, arc_levels, arcs_to_draw, display_width, pack_rows
from depinduce.structures.sentence import Sentence
from depinduce.structures.spans import is_preterminal

WORD_FONT = 15
SMALL_FONT = 11
ARC_STEP = 26  # vertical distance between arc levels
TREE_STEP = 28  # vertical distance between tree levels
MARGIN = 14

STYLE = """
.word{font:15px sans-serif;fill:#111}
.tag{font:11px sans-serif;fill:#888}
.arc path{fill:none;stroke:#2f4f7f;stroke-width:1.5}
.arc polygon{fill:#2f4f7f}
.arc text,.root text{font:11px sans-serif;fill:#2f4f7f;paint-order:stroke;stroke:#fff;stroke-width:3px}
.root path{stroke:#2f4f7f;stroke-width:1.5}.root polygon{fill:#2f4f7f}
.arc.punct{opacity:.3}
.arc.wrong path,.root.wrong path{stroke:#d00}.arc.wrong polygon,.root.wrong polygon{fill:#d00}
.arc.wrong text,.root.wrong text,text.wrong-label{fill:#d00}
.arc.gold path,.root.gold path{stroke:#090;stroke-dasharray:5 3}
.arc.gold polygon,.root.gold polygon{fill:#090}.arc.gold text,.root.gold text{fill:#090}
.edge{stroke:#aaa;stroke-width:1}
.node text{font:11px sans-serif;fill:#555}.node circle{fill:#888}
.node.wrong text{fill:#d00}.node.wrong circle{fill:#d00}
.missing rect{fill:#f90;fill-opacity:.35;stroke:#e80}
.missing text{font:10px sans-serif;fill:#a50}
""".strip()

# The chars outside XML 1.0's Char production that :func:`~depinduce.display.html_text` leaves (surrogates,
# U+FFFE/FFFF) would make the SVG unreadable.
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")


def escape(text: str) -> str:
    """Text or attribute content for XML: the one HTML policy (:func:`~depinduce.display.html_text`: entities,
    controls as visible escapes), and characters XML forbids as U+FFFD."""
    return _NOT_XML.sub("\ufffd", html_text(text))


def _text_px(text: str, size: int) -> float:
    """An estimate of the drawn width, generous so that neighbouring words never touch."""
    return display_width(text) * size * 0.62


@dataclass
class _Canvas:
    """Column centres and the rows of one figure."""

    xs: list[float]
    width: float
    word_y: float = 0.0
    parts: list[str] = field(default_factory=list)

    def add(self, svg: str) -> None:
        self.parts.append(svg)


def _columns(sentence: Sentence) -> tuple[list[float], float]:
    """The x centre of each word and the total width: each column fits its word, its tag and the label of its
    incoming arc (so the label of an arc between neighbours fits between them)."""
    xs: list[float] = []
    x = MARGIN
    for i, word in enumerate(sentence.words):
        extras = [_text_px(word, WORD_FONT)]
        if sentence.upos is not None:
            extras.append(_text_px(sentence.upos[i], SMALL_FONT))
        if sentence.deprels is not None:
            extras.append(_text_px(sentence.deprels[i], SMALL_FONT))
        width = max(28.0, *extras) + 10  # tight: a long sentence is scaled to the window, so its size is its legibility
        xs.append(x + width / 2)
        x += width
    return xs, x + MARGIN


def _arrow(x: float, y: float) -> str:
    """An arrowhead pointing down with its tip at (x, y)."""
    return f'<polygon points="{x - 4:.1f},{y - 7:.1f} {x + 4:.1f},{y - 7:.1f} {x:.1f},{y:.1f}"/>'


def _draw_arcs(canvas: _Canvas, arcs: list[Arc], top: float) -> None:
    """Arcs above the words; ``top`` is the y of the highest arc level (plus room for the root's label)."""
    base = canvas.word_y - WORD_FONT - 4
    ordinary = [arc for arc in arcs if arc.head != 0]
    levels = arc_levels([(min(a.head, a.dep), max(a.head, a.dep)) for a in ordinary])
    for arc, level in zip(ordinary, levels):
        x_head, x_dep = canvas.xs[arc.head - 1], canvas.xs[arc.dep - 1]
        x_head += 5 if x_dep > x_head else -5  # outgoing arcs leave beside the word's incoming arrow
        if "gold" in arc.classes:  # beside the wrong predicted arc into the same word, not on top of it
            x_dep += 4
        y = base - level * ARC_STEP
        r = min(6.0, abs(x_dep - x_head) / 2)
        sign = 1 if x_dep > x_head else -1
        path = (f"M{x_head:.1f},{base:.1f} L{x_head:.1f},{y + r:.1f} Q{x_head:.1f},{y:.1f} "
                f"{x_head + sign * r:.1f},{y:.1f} L{x_dep - sign * r:.1f},{y:.1f} Q{x_dep:.1f},{y:.1f} "
                f"{x_dep:.1f},{y + r:.1f} L{x_dep:.1f},{base - 6:.1f}")
        label = ""
        if arc.label:
            label = (f'<text x="{(x_head + x_dep) / 2:.1f}" y="{y + 4:.1f}" text-anchor="middle" '
                     f'class="{"label wrong-label" if "wrong-label" in arc.classes else "label"}">'
                     f"{escape(arc.label)}</text>")
        title = f"<title>{arc.head} → {arc.dep}{' ' + escape(arc.label) if arc.label else ''}</title>"
        canvas.add(f'<g class="{arc.classes}" data-head="{arc.head}" data-dep="{arc.dep}">{title}'
                   f'<path d="{path}"/>{_arrow(x_dep, base)}{label}</g>')
    for arc in arcs:
        if arc.head != 0:
            continue
        x = canvas.xs[arc.dep - 1] + (9 if "gold" in arc.classes else 0)
        classes = arc.classes.replace("arc", "root", 1)
        label = arc.label or "root"
        canvas.add(f'<g class="{classes}" data-head="0" data-dep="{arc.dep}"><title>root → {arc.dep}</title>'
                   f'<path d="M{x:.1f},{top + 6:.1f} L{x:.1f},{base - 6:.1f}"/>{_arrow(x, base)}'
                   f'<text x="{x:.1f}" y="{top:.1f}" text-anchor="middle">{escape(label)}</text></g>')


def _node_layout(tree: Tree, xs: Sequence[float]) -> list[tuple[Tree, float, int, list[tuple[float, int]], int, int]]:
    """(node, x, height, children's (x, height), start, end) for every phrase node; words and preterminals are
    height 0 at their word's x."""
    out: list[tuple[Tree, float, int, list[tuple[float, int]], int, int]] = []

    def walk(node: Tree | str, start: int) -> tuple[float, int, int]:
        if not isinstance(node, Tree) or is_preterminal(node):
            return xs[start], 0, start + 1
        pos = start
        kids: list[tuple[float, int]] = []
        for child in node:
            x, height, pos = walk(child, pos)
            kids.append((x, height))
        x = (kids[0][0] + kids[-1][0]) / 2 if kids else xs[min(start, len(xs) - 1)]
        height = 1 + max((h for _, h in kids), default=0)
        out.append((node, x, height, kids, start, pos))
        return x, height, pos

    walk(tree, 0)
    return out


def _draw_tree(canvas: _Canvas, tree: Tree, top: float, marks: Marks | None) -> float:
    """The tree hanging below the words from ``top``; returns the y below it."""
    nodes = _node_layout(tree, canvas.xs)
    # a deep tree (right-branching over a long sentence) gets flatter levels instead of a very tall figure
    step = max(14.0, min(TREE_STEP, 360 / max((height for _, _, height, _, _, _ in nodes), default=1)))
    bottom = top
    for node, x, height, kids, start, end in nodes:
        y = top + height * step
        bottom = max(bottom, y)
        for kx, kh in kids:
            ky = top + kh * step
            tip = ky + (4 if kh else -6)  # below a child node's label, or just under the word (and its tag)
            canvas.add(f'<line class="edge" x1="{x:.1f}" y1="{y - 8:.1f}" x2="{kx:.1f}" y2="{tip:.1f}"/>')
        wrong = marks is not None and (start, end) in marks.wrong_spans
        classes = "node wrong" if wrong else "node"
        label = node.label()
        mark = (f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle">{escape(label)}</text>' if label
                else f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3"/>')
        canvas.add(f'<g class="{classes}" data-start="{start}" data-end="{end}">{mark}</g>')
    return bottom + 12


def _draw_missing(canvas: _Canvas, spans: list[tuple[str, int, int]], top: float) -> float:
    """Gold spans missing from the prediction as bars under the tree, packed into rows; returns the y below."""
    half = [(canvas.xs[k + 1] - canvas.xs[k]) / 2 if k + 1 < len(canvas.xs) else 20 for k in range(len(canvas.xs))]
    rows = pack_rows([(a, b) for _, a, b in spans])
    for (label, a, b), row in zip(spans, rows):
        y = top + row * 20
        x1 = canvas.xs[a] - half[max(a - 1, 0)] + 3
        x2 = canvas.xs[b - 1] + half[b - 1] - 3
        text = f"missing {label}" if label else "missing"
        canvas.add(f'<g class="missing" data-start="{a}" data-end="{b}"><title>gold span {a + 1}–{b} '
                   f'{escape(label)} is not in the prediction</title><rect x="{x1:.1f}" y="{y:.1f}" '
                   f'width="{x2 - x1:.1f}" height="15" rx="3"/><text x="{(x1 + x2) / 2:.1f}" y="{y + 11:.1f}" '
                   f'text-anchor="middle">{escape(text)}</text></g>')
    return top + (max(rows) + 1) * 20 + 8 if rows else top


def sentence_svg_parts(sentence: Sentence, marks: Marks | None = None) -> tuple[list[str], float, float]:
    """The SVG elements of one figure, its width and its height (shared by the SVG and HTML writers)."""
    xs, width = _columns(sentence)
    arcs = arcs_to_draw(sentence, marks)
    ordinary = [(min(a.head, a.dep), max(a.head, a.dep)) for a in arcs if a.head != 0]
    top_level = max(arc_levels(ordinary), default=0)
    has_root = any(a.head == 0 for a in arcs)
    top = MARGIN + SMALL_FONT
    word_y = top + (top_level + (1 if has_root else 0)) * ARC_STEP + WORD_FONT + 12
    canvas = _Canvas(xs, width, word_y)
    _draw_arcs(canvas, arcs, top)
    for i, (word, x) in enumerate(zip(sentence.words, xs), start=1):
        canvas.add(f'<text class="word" data-i="{i}" x="{x:.1f}" y="{word_y:.1f}" text-anchor="middle">'
                   f"{escape(word)}</text>")
    y = word_y + 6
    if sentence.upos is not None and any(tag not in ("_", "") for tag in sentence.upos):
        for tag, x in zip(sentence.upos, xs):
            if tag in ("_", ""):
                continue
            canvas.add(f'<text class="tag" x="{x:.1f}" y="{y + SMALL_FONT:.1f}" text-anchor="middle">'
                       f"{escape(tag)}</text>")
        y += SMALL_FONT + 4
    if sentence.tree is not None and len(sentence.tree.leaves()) == len(sentence.words) and sentence.words:
        y = _draw_tree(canvas, sentence.tree, y + 14, marks)
    if marks is not None and marks.missing_spans:
        y = _draw_missing(canvas, marks.missing_spans, y + 4)
    return canvas.parts, width, y + MARGIN


def sentence_svg(sentence: Sentence, marks: Marks | None = None, *, standalone: bool = True) -> str:
    """One sentence as an ``<svg>`` element (``standalone``: a whole SVG document with its own style)."""
    parts, width, height = sentence_svg_parts(sentence, marks)
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" class="depinduce">')
    style = f"<style>{STYLE}</style>" if standalone else ""
    return head + style + "".join(parts) + "</svg>"
