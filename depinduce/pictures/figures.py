"""Tree pictures: a sentence's dependency arcs (and its constituency tree) as SVG, a whole file as one HTML page.

Each figure has the words on a baseline (UPOS under them when known), one arc per word above them from its head,
its height set by how many arcs it spans so that nested arcs never overlap, an arrowhead at the dependent and the
relation label on top; the root word gets an arrow from above.  Arcs to punctuation are drawn lighter (class
``punct``).  When the sentence has a constituency tree it hangs below the words, the root at the bottom.

Compared with a gold sentence (``depinduce show --gold``), paired and scored as ``eval`` pairs and scores them
(punctuation by the gold's rule is never wrong and drawn dim, a prediction may hold punctuation the gold lacks,
a word whose head was punctuation is judged after re-attachment), an arc whose head is wrong is red
(class ``wrong``) and the gold arc is drawn dashed beside it (class ``gold``); a label wrong under the right head
is red; a predicted constituent that is not in the gold tree is red, and each gold span missing from the
predicted tree is a highlighted bar under the tree (class ``missing``).

``--format svg`` writes one SVG document with the sentences stacked top to bottom; an SVG's size is fixed in
its opening tag, so that writer keeps each rendered figure (text, not the sentences) until the input ends.
``--format html`` streams: a self-contained page (inline CSS, no network) with one ``<figure>`` per sentence.
Each figure is scaled down to fit the window (a 48-word sentence is some 3,800 px wide); a click on it shows it
at full size, scrolling sideways.  Hovering a word highlights its arcs — to its head and to its dependents — and
dims the others.  The page's small inline script does both, and records each word's rendered width
(``data-width``) and each figure's (``data-rendered-width``), which is how the tests check in a real browser
that every token was drawn and that the figure fits.  ``show --format svg --out-dir DIR`` writes one standalone
SVG per sentence (:func:`write_svg_files`).
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from nltk import Tree

from depinduce.data.punct import sentence_punct_mask
from depinduce.errors import UsageError
from depinduce.io import read_sentences
from depinduce.io.lines import display_name
from depinduce.metrics.dependency import universal_label
from depinduce.metrics.evaluate import Alignment, align
from depinduce.structures.sentence import Sentence
from depinduce.structures.spans import is_preterminal, labelled_spans

WORD_FONT = 15
SMALL_FONT = 11
ARC_STEP = 26  # vertical distance between arc levels
TREE_STEP = 28  # vertical distance between tree levels
MARGIN = 14

# Labels an unlabelled parse writes: comparing them with gold labels says nothing.
_UNLABELLED = frozenset({"root", "dep", "punct", "_", ""})

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

# Every char outside XML 1.0's Char production (C0 controls, surrogates, U+FFFE/FFFF) would make the SVG unreadable.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def escape(text: str) -> str:
    """Text or attribute content for XML: ``< > & " '`` as entities, characters XML forbids as U+FFFD."""
    return html.escape(_NOT_XML.sub("\ufffd", text), quote=True)


def display_width(text: str) -> int:
    """Terminal cells (and, scaled, drawing width) of ``text``: wide East Asian characters count two, combining
    marks none."""
    width = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def _text_px(text: str, size: int) -> float:
    """An estimate of the drawn width, generous so that neighbouring words never touch."""
    return display_width(text) * size * 0.62


# ------------------------------------------------------------------------------------------------ comparison


@dataclass
class Marks:
    """What differs between a predicted sentence and its gold: drives the colours (pictures) and ``✗`` (text)."""

    gold_heads: list[int] | None = None  # per predicted token: its gold head, in the prediction's positions
    gold_deprels: list[str] | None = None
    scored: int = 0  # the words ``eval`` scores (punctuation left out)
    unscored: set[int] = field(default_factory=set)  # 1-based predicted tokens ``eval`` leaves out
    wrong_heads: set[int] = field(default_factory=set)  # 1-based dependents whose head is wrong
    wrong_labels: set[int] = field(default_factory=set)  # right head, wrong label
    wrong_spans: set[tuple[int, int]] = field(default_factory=set)  # predicted constituents not in the gold
    missing_spans: list[tuple[str, int, int]] = field(default_factory=list)  # gold constituents not predicted


def _spans(tree: Tree) -> dict[tuple[int, int], str]:
    """Constituents of more than one word, unlabelled, each with its (first) label."""
    spans: dict[tuple[int, int], str] = {}
    for label, a, b in labelled_spans(tree):
        if b - a > 1:
            spans.setdefault((a, b), label)
    return spans


def compare(pred: Sentence, gold: Sentence, pair: Alignment | None = None) -> Marks:
    """The differences of ``pred`` from ``gold`` over the tokens ``eval`` scores: punctuation (the gold's rule) is
    never wrong, and a word whose head was punctuation is judged after re-attachment, as DDA judges it.

    ``pair``: the two sentences' alignment from :func:`depinduce.metrics.evaluate.align` (computed here when not
    given), so a prediction with punctuation the gold lacks is compared too."""
    if pair is None:
        pair = align([gold], [pred])[0]
    positions = [i for i, kept in enumerate(pair.pred_keep, start=1) if kept]  # each scored word's position

    def placed(head: int) -> int:
        return positions[head - 1] if head else 0

    marks = Marks(scored=len(positions), unscored={i for i, kept in enumerate(pair.pred_keep, start=1) if not kept})
    if pred.heads is not None and gold.heads is not None:
        gold_heads, pred_heads = pair.heads(gold, pred)
        gold_labels = [label for label, kept in zip(gold.deprels or [], pair.gold_keep) if kept]
        pred_labels = pred.deprels or []
        marks.gold_heads = list(pred.heads)
        marks.gold_deprels = list(pred_labels) if pred.deprels is not None and gold_labels else None
        # labels an unlabelled parse writes say nothing against the gold's; compared as LAS compares them
        labelled = marks.gold_deprels is not None and any(universal_label(label) not in _UNLABELLED
                                                          for label in pred_labels)
        for j, (g, p) in enumerate(zip(gold_heads, pred_heads)):
            i = positions[j]
            marks.gold_heads[i - 1] = placed(g)
            if marks.gold_deprels is not None:
                marks.gold_deprels[i - 1] = gold_labels[j]
            if p != g:
                marks.wrong_heads.add(i)
            elif labelled and universal_label(pred_labels[i - 1]) != universal_label(gold_labels[j]):
                marks.wrong_labels.add(i)
    if gold.tree is not None and (pred.tree is not None or pred.heads is not None):
        gold_labelled, predicted = pair.spans(gold, pred)
        wanted: dict[tuple[int, int], str] = {}
        for label, a, b in gold_labelled:
            if 1 < b - a < len(positions):
                wanted.setdefault((a, b), label)
        marks.missing_spans = sorted((label, placed(a + 1) - 1, placed(b)) for (a, b), label in wanted.items()
                                     if (a, b) not in predicted)
        if pred.tree is not None:
            marks.wrong_spans = {(a, b) for a, b in _spans(pred.tree) if _scored_span(a, b, pair.pred_keep) and
                                 _restricted(a, b, pair.pred_keep) not in wanted}
    return marks


def unscored_mask(sentence: Sentence, marks: Marks | None) -> list[bool]:
    """The tokens drawn dim: against a gold, those ``eval`` leaves out; alone, the sentence's own punctuation."""
    if marks is None:
        return sentence_punct_mask(sentence)
    return [i in marks.unscored for i in range(1, len(sentence.words) + 1)]


def _restricted(a: int, b: int, keep: Sequence[bool]) -> tuple[int, int]:
    """A predicted span over the scored words only (as UF1 restricts it)."""
    return sum(keep[:a]), sum(keep[:b])


def _scored_span(a: int, b: int, keep: Sequence[bool]) -> bool:
    """True when the span, over the scored words, is one UF1 counts (more than one word, not all of them)."""
    start, end = _restricted(a, b, keep)
    return 1 < end - start < sum(keep)


# ------------------------------------------------------------------------------------------------ layout


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


# ------------------------------------------------------------------------------------------------ SVG


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


def write_svg(sentences: Iterable[Sentence], stream: TextIO,
              marks: Iterable[Marks | None] | None = None) -> int:
    """One SVG document, the sentences stacked top to bottom each under its caption."""
    figures: list[tuple[str, list[str], float, float]] = []
    all_marks = iter(marks) if marks is not None else None
    for ordinal, sentence in enumerate(sentences, start=1):
        mark = next(all_marks, None) if all_marks is not None else None
        parts, width, height = sentence_svg_parts(sentence, mark)
        figures.append((caption(sentence, ordinal, mark), parts, width, height))
    total_width = max((w for _, _, w, _ in figures), default=2 * MARGIN)
    total_height = sum(h + 22 for _, _, _, h in figures) + MARGIN
    stream.write(f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_width:.0f}" height="{total_height:.0f}" '
                 f'viewBox="0 0 {total_width:.0f} {total_height:.0f}" class="depinduce">\n'
                 f"<style>{STYLE}\n.caption{{font:12px sans-serif;fill:#444}}</style>\n")
    y = 0.0
    for ordinal, (text, parts, _, height) in enumerate(figures, start=1):
        stream.write(f'<g class="sentence" data-sentence="{ordinal}" transform="translate(0,{y:.0f})">'
                     f'<text class="caption" x="{MARGIN}" y="18">{escape(text)}</text>'
                     f'<g transform="translate(0,22)">{"".join(parts)}</g></g>\n')
        y += height + 22
    stream.write("</svg>\n")
    return len(figures)


# ------------------------------------------------------------------------------------------------ HTML

_PAGE_STYLE = """
body{font-family:sans-serif;margin:1.5em;color:#222}
figure{margin:0 0 1.2em 0;padding:.6em;border:1px solid #ddd;border-radius:6px;overflow-x:auto}
figcaption{font-size:13px;color:#444;margin-bottom:.3em}
figure svg{max-width:100%;height:auto;cursor:zoom-in}
figure.zoom svg{max-width:none;cursor:zoom-out}
svg text.word{cursor:pointer}
figure.hovering .arc,figure.hovering .root{opacity:.12}
figure.hovering .arc.hl,figure.hovering .root.hl{opacity:1}
.hl path{stroke-width:3}
text.word.hl{font-weight:bold;fill:#b50}
.legend{font-size:12px;color:#555;margin-bottom:1em}
.legend b{font-weight:normal;padding:0 .3em;border-radius:3px}
""".strip()

# Records each word's and each figure's rendered width, so a headless browser's DOM shows that every token was
# really drawn and that the figure fits; zooms a clicked figure; highlights a hovered word's arcs.
_PAGE_SCRIPT = """
const words = document.querySelectorAll('svg text.word');
for (const w of words) { w.setAttribute('data-width', w.getBBox().width.toFixed(1)); }
document.body.setAttribute('data-words-drawn', String(words.length));
for (const fig of document.querySelectorAll('figure')) {
  const svg = fig.querySelector('svg');
  svg.setAttribute('data-rendered-width', svg.getBoundingClientRect().width.toFixed(0));
  svg.addEventListener('click', () => fig.classList.toggle('zoom'));
  const off = () => { fig.classList.remove('hovering'); fig.querySelectorAll('.hl').forEach(e => e.classList.remove('hl')); };
  for (const w of fig.querySelectorAll('text.word')) {
    const i = w.getAttribute('data-i');
    w.addEventListener('mouseenter', () => {
      off(); fig.classList.add('hovering'); w.classList.add('hl');
      fig.querySelectorAll(`[data-head="${i}"],[data-dep="${i}"]`).forEach(e => e.classList.add('hl'));
    });
    w.addEventListener('mouseleave', off);
  }
}
""".strip()


def _page_head(title: str, gold: bool) -> str:
    legend = ("Arcs go from head to dependent (arrowhead); lighter arcs attach punctuation; the constituency "
              "tree, where there is one, hangs below the words.")
    if gold:
        legend += (' <b style="color:#d00">Red</b>: wrong head, label or constituent; '
                   '<b style="color:#090">dashed green</b>: the gold arc; '
                   '<b style="background:#fd9">orange</b>: a gold span missing from the prediction.')
    return (f'<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n<title>{escape(title)}</title>\n'
            f"<style>\n{_PAGE_STYLE}\n{STYLE}\n</style>\n</head>\n<body>\n<h1 style=\"font-size:18px\">"
            f'{escape(title)}</h1>\n<p class="legend">{legend}</p>\n')


def write_html(sentences: Iterable[Sentence], stream: TextIO, marks: Iterable[Marks | None] | None = None,
               *, title: str = "depinduce parse") -> int:
    """A self-contained HTML page, one figure per sentence, written as the sentences arrive."""
    stream.write(_page_head(title, marks is not None))
    all_marks = iter(marks) if marks is not None else None
    count = 0
    for count, sentence in enumerate(sentences, start=1):
        mark = next(all_marks, None) if all_marks is not None else None
        stream.write(f'<figure data-sentence="{count}"><figcaption>{escape(caption(sentence, count, mark))}'
                     f"</figcaption>{sentence_svg(sentence, mark, standalone=False)}</figure>\n")
    stream.write(f"<script>\n{_PAGE_SCRIPT}\n</script>\n</body>\n</html>\n")
    return count


def write_svg_files(sentences: Sequence[Sentence], folder: str, marks: Sequence[Marks | None] | None = None,
                    *, first: int = 1) -> list[str]:
    """One standalone SVG per sentence in ``folder`` (``sentence-0001.svg``… numbered from ``first``, its caption
    as the SVG's title), each written atomically; returns the files' paths.  The caller checks the folder
    (:func:`depinduce.io.outputs.check_new_folder`)."""
    from pathlib import Path

    from depinduce.io.outputs import atomic_write_text

    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    digits = max(4, len(str(first + len(sentences) - 1)))
    written = []
    for offset, sentence in enumerate(sentences):
        mark = marks[offset] if marks is not None else None
        svg = sentence_svg(sentence, mark)
        head, rest = svg.split(">", 1)
        title = f"<title>{escape(caption(sentence, first + offset, mark))}</title>"
        path = target / f"sentence-{first + offset:0{digits}d}.svg"
        atomic_write_text(path, head + ">" + title + rest + "\n")
        written.append(str(path))
    return written


# ------------------------------------------------------------------------------------------------ show


def load_pictures(path: str, gold_path: str | None = None, sentence: int | None = None,
                  ) -> tuple[list[Sentence], list[Marks | None] | None]:
    """What ``depinduce show`` draws: the sentences of ``path`` (any readable format; heads need not form a tree,
    so a decoder's faulty output can be looked at) and, with a gold file over the same tokens, their marks.

    ``sentence`` (1-based) keeps only that sentence; the whole files are still checked against each other."""
    sentences = read_sentences(path, check_trees=False)
    marks: list[Marks | None] | None = None
    if gold_path is not None:
        gold = read_sentences(gold_path, check_trees=False)
        pairs = align(gold, sentences, gold_path=display_name(gold_path), pred_path=display_name(path))
        marks = [compare(p, g, pair) for p, g, pair in zip(sentences, gold, pairs)]
    if sentence is not None:
        if not 1 <= sentence <= len(sentences):
            raise UsageError(f"--sentence {sentence}: {display_name(path)} has {len(sentences)} sentences")
        chosen = sentences[sentence - 1]
        if chosen.sent_id is None:  # its caption keeps its number in the file
            chosen.sent_id = str(sentence)
        sentences = [chosen]
        marks = [marks[sentence - 1]] if marks is not None else None
    return sentences, marks
