"""Dependency arcs drawn in text, for ``depinduce show`` in a terminal.

Each word gets a column at least three cells wide: an arc comes down into the middle cell (``▼``) from the
word's head, and leaves the word from the cell left or right of it towards its own dependents, so arcs that meet
at a word never share a cell.  Arcs are stacked in rows as in the pictures (an arc above every arc it covers,
and arcs that would overlap in a row moved up); lines that cross become ``┼``, lines that meet ``├ ┤ ┬ ┴``.
The root word gets a line from ``ROOT`` at the top.  Under the words: the relation labels, and in gold mode a
``✗`` row: ``✗→HEAD`` under a word whose head is wrong (the gold head's form, or ``ROOT``), ``✗ LABEL`` under
one whose label is wrong.  A constituency tree (a bracketed file) follows as brackets under the words, one row
per height (``└─NP─┘``); in gold mode a predicted constituent missing from the gold is labelled ``✗`` and each
gold span missing from the prediction is a ``missing NP`` (or ``✗ NP``) bracket in the rows below.  Coloured
(only when asked, i.e. on a terminal): wrong arcs and spans red, punctuation dim.  A sentence wider than
``width`` cells is cut between words into pieces stacked one under the other (``… words 21-40 of 48``), each
piece whole columns: an arc to a word in another piece runs off the piece's edge into the number of the word at
its other end (``───→17`` to word 17 further right, ``←3───`` to word 3 further left), so it can be followed
across pieces.  The caption is wrapped to the width between words.

Example (``The dog barks .``, heads 2 3 0 3)::

             ROOT
     ┌──┐┌───┐│┌───┐
     ▼  │▼   │▼│   ▼
    The dog barks  .
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from depinduce.display import printable
from depinduce.pictures.compare import Marks, unscored_mask
from depinduce.pictures.layout import caption, display_width, pack_rows, phrases
from depinduce.structures.sentence import Sentence

_UP, _DOWN, _LEFT, _RIGHT = 1, 2, 4, 8
_BOX = {
    _LEFT | _RIGHT: "─", _UP | _DOWN: "│", _DOWN | _RIGHT: "┌", _DOWN | _LEFT: "┐", _UP | _RIGHT: "└",
    _UP | _LEFT: "┘", _UP | _DOWN | _RIGHT: "├", _UP | _DOWN | _LEFT: "┤", _LEFT | _RIGHT | _DOWN: "┬",
    _LEFT | _RIGHT | _UP: "┴", _UP | _DOWN | _LEFT | _RIGHT: "┼",
    _UP: "│", _DOWN: "│", _LEFT: "─", _RIGHT: "─",
}
# Cell styles by priority: a wrong arc shows through an ordinary one, an ordinary one through punctuation.
_PUNCT, _PLAIN, _WRONG = 1, 2, 3
_ANSI = {_PUNCT: "\x1b[2m", _WRONG: "\x1b[31m"}
_RESET = "\x1b[0m"
_COLOUR = re.compile("\x1b\\[[0-9;]*m")


@dataclass(frozen=True)
class _TextArc:
    lo: int  # leftmost cell
    hi: int  # rightmost cell
    source: int  # the head's cell
    target: int  # the dependent's cell (its ▼)
    words: tuple[int, int]  # word span, for nesting
    style: int


def _rows(arcs: Sequence[_TextArc]) -> list[int]:
    """Row of each arc (1 = just above the words): above every arc nested in it, and clear of any arc in its row."""
    order = sorted(range(len(arcs)), key=lambda k: (arcs[k].words[1] - arcs[k].words[0], arcs[k].words[0]))
    rows = [0] * len(arcs)
    placed: list[int] = []
    for k in order:
        arc = arcs[k]
        row = 1 + max((rows[j] for j in placed
                       if arc.words[0] <= arcs[j].words[0] and arcs[j].words[1] <= arc.words[1]), default=0)
        while any(rows[j] == row and not (arcs[j].hi < arc.lo or arc.hi < arcs[j].lo) for j in placed):
            row += 1
        rows[k] = row
        placed.append(k)
    return rows


class _Grid:
    """Cells of box-drawing directions (or fixed characters), each with a style."""

    def __init__(self, height: int, width: int) -> None:
        self.dirs = [[0] * width for _ in range(height)]
        self.chars: list[list[str | None]] = [[None] * width for _ in range(height)]
        self.style = [[0] * width for _ in range(height)]

    def line(self, y: int, x: int, directions: int, style: int) -> None:
        self.dirs[y][x] |= directions
        self.style[y][x] = max(self.style[y][x], style)

    def put(self, y: int, x: int, text: str, style: int = 0) -> None:
        """Write ``text`` from cell x; a wide character takes two cells; control characters are shown escaped."""
        for ch in printable(text):
            if x >= len(self.chars[y]):
                return
            self.chars[y][x] = ch
            self.style[y][x] = max(self.style[y][x], style)
            if display_width(ch) == 2 and x + 1 < len(self.chars[y]):
                self.chars[y][x + 1] = ""
                x += 1
            x += 1

    def render(self, color: bool) -> list[str]:
        out = []
        for y, row in enumerate(self.dirs):
            cells = []
            for x, directions in enumerate(row):
                char = self.chars[y][x]
                text = char if char is not None else _BOX.get(directions, " ")
                style = self.style[y][x]
                if color and style in _ANSI and text.strip():
                    text = f"{_ANSI[style]}{text}{_RESET}"
                cells.append(text)
            out.append("".join(cells).rstrip())
        return out


def _mark(sentence: Sentence, marks: Marks, i: int) -> str:
    """The ``✗`` note under word i (1-based), or ''."""
    if i in marks.wrong_heads and marks.gold_heads is not None:
        head = marks.gold_heads[i - 1]
        return f"✗→{sentence.words[head - 1] if head else 'ROOT'}"
    if i in marks.wrong_labels and marks.gold_deprels is not None:
        return f"✗ {marks.gold_deprels[i - 1]}"
    return ""


def _cut(line: str, lo: int, hi: int) -> str:
    """Cells ``lo``..``hi``-1 of a drawn line; colour codes are kept wherever they are, so none is left open."""
    out: list[str] = []
    x = k = 0
    while k < len(line):
        if line[k] == "\x1b":
            end = line.index("m", k) + 1
            out.append(line[k:end])
            k = end
            continue
        cells = display_width(line[k])
        if lo <= x and x + cells <= hi:
            out.append(line[k])
        x, k = x + cells, k + 1
    return "".join(out).rstrip()


def _pieces(starts: Sequence[int], widths: Sequence[int], width: int) -> list[tuple[int, int]]:
    """Word ranges [a, b) whose columns fit ``width`` cells (a word wider than that alone in its piece)."""
    pieces, a = [], 0
    for b in range(1, len(starts) + 1):
        if b - 1 > a and starts[b - 1] + widths[b - 1] - starts[a] > width:
            pieces.append((a, b - 1))
            a = b - 1
    return pieces + [(a, len(starts))]


def _visible_width(line: str) -> int:
    """Cells a drawn line takes on the terminal (its colour codes take none)."""
    return display_width(_COLOUR.sub("", line))


def _edge_mark(text: str, style: int, color: bool) -> str:
    return f"{_ANSI[style]}{text}{_RESET}" if color and style in _ANSI else text


def sentence_text(sentence: Sentence, marks: Marks | None = None, *, color: bool = False,
                  width: int | None = None) -> list[str]:
    """The lines that draw one sentence's arcs over its words, and its tree under them (no caption); wider
    than ``width`` cells, cut between words into pieces stacked one under another.  An arc cut by a piece's edge
    ends there in the number of the word at its other end (``→17``, ``←3``): without it a reader cannot tell
    where an arc leaving a piece arrives."""
    lines, starts, widths, placed = _sentence_lines(sentence, marks, color=color)
    if not width or not starts or starts[-1] + widths[-1] <= width:
        return lines
    # room beside each piece for the marks of the arcs cut by its edges (``←45`` left, ``→45`` right)
    mark_width = 1 + len(str(len(starts)))
    room = width - 2 * mark_width if width - 2 * mark_width >= max(widths) else width
    out: list[str] = []
    for a, b in _pieces(starts, widths, room):
        first, last = starts[a], starts[b - 1] + widths[b - 1]  # the piece's cells: [first, last)
        left = {y: (f"←{arc.words[0]}", arc.style) for y, arc in placed if arc.lo < first <= arc.hi}
        right = {y: (f"→{arc.words[1]}", arc.style) for y, arc in placed if arc.lo < last <= arc.hi}
        margin = max((display_width(text) for text, _ in left.values()), default=0)
        out.append(f"… words {a + 1}-{b} of {len(starts)}")
        for y, line in enumerate(lines):
            cut = _cut(line, first, last)
            text, style = left.get(y, ("", 0))
            row = " " * (margin - display_width(text)) + _edge_mark(text, style, color) + cut
            if y in right:
                text, style = right[y]
                row += " " * (margin + last - first - _visible_width(row)) + _edge_mark(text, style, color)
            out.append(row.rstrip())
    return out


def _sentence_lines(sentence: Sentence, marks: Marks | None, *, color: bool
                    ) -> tuple[list[str], list[int], list[int], list[tuple[int, _TextArc]]]:
    """The whole drawing's lines, each word's first cell and width, and each arc with the line it runs in."""
    n = len(sentence.words)
    # user text escaped before it is measured: a token's escape sequence must never reach the terminal
    words = [printable(w) for w in sentence.words]
    labels = [printable(label) for label in sentence.deprels] if sentence.deprels is not None else [""] * n
    notes = [printable(_mark(sentence, marks, i)) for i in range(1, n + 1)] if marks is not None else [""] * n
    widths = [max(3, display_width(w), display_width(l), display_width(m))
              for w, l, m in zip(words, labels, notes)]
    starts = [sum(widths[:k]) + k for k in range(n)]
    centres = [s + (w - 1) // 2 for s, w in zip(starts, widths)]
    total = (starts[-1] + widths[-1]) if n else 0
    heads = sentence.heads
    if heads is None:
        return [_centred_row(total, starts, widths, words),
                *_tree_lines(sentence, marks, starts, widths, color=color)], starts, widths, []
    punct = unscored_mask(sentence, marks)
    arcs: list[_TextArc] = []
    for d, h in enumerate(heads, start=1):
        if h == 0:
            continue
        source = centres[h - 1] + (1 if d > h else -1)
        target = centres[d - 1]
        style = _WRONG if marks is not None and d in marks.wrong_heads else _PUNCT if punct[d - 1] else _PLAIN
        arcs.append(_TextArc(min(source, target), max(source, target), source, target, (min(h, d), max(h, d)),
                             style))
    rows = _rows(arcs)
    top = max(rows, default=0) + 1  # the ROOT row above every arc
    grid = _Grid(top + 1, total)
    arrow = top  # the row of ▼ just above the words
    for arc, row in zip(arcs, rows):
        y = top - row
        for x in range(arc.lo, arc.hi + 1):
            grid.line(y, x, (_LEFT if x > arc.lo else 0) | (_RIGHT if x < arc.hi else 0), arc.style)
        for x in (arc.source, arc.target):
            grid.line(y, x, _DOWN, arc.style)
            for below in range(y + 1, arrow):
                grid.line(below, x, _UP | _DOWN, arc.style)
        grid.line(arrow, arc.source, _UP | _DOWN, arc.style)
        grid.put(arrow, arc.target, "▼", arc.style)
    for d, h in enumerate(heads, start=1):
        if h != 0:
            continue
        x = centres[d - 1]
        style = _WRONG if marks is not None and d in marks.wrong_heads else _PLAIN
        for y in range(1, arrow):
            grid.line(y, x, _UP | _DOWN, style)
        grid.put(arrow, x, "▼", style)
        grid.put(0, max(0, min(x - 1, total - 4)), "ROOT", style)
    lines = grid.render(color)
    lines.append(_centred_row(total, starts, widths, words))
    if any(labels):
        lines.append(_centred_row(total, starts, widths, labels))
    if any(notes):
        row = _centred_row(total, starts, widths, notes)
        lines.append(row.replace("✗", "\x1b[31m✗\x1b[0m") if color else row)
    placed = [(top - row, arc) for arc, row in zip(arcs, rows)]
    return lines + _tree_lines(sentence, marks, starts, widths, color=color), starts, widths, placed


def _tree_lines(sentence: Sentence, marks: Marks | None, starts: Sequence[int], widths: Sequence[int], *,
                color: bool) -> list[str]:
    """The constituency tree as brackets under the words, one row per height (``└─NP─┘``); in gold mode a
    predicted constituent the gold lacks is labelled ``✗``, and each missing gold span is a ``missing`` bracket
    in the rows below."""
    tree = sentence.tree
    if tree is None or not sentence.words or len(tree.leaves()) != len(sentence.words):
        return []
    nodes = phrases(tree)
    missing = marks.missing_spans if marks is not None else []
    missing_rows = pack_rows([(a, b) for _, a, b in missing])
    height = max((h for _, _, _, h in nodes), default=0)
    grid = _Grid(height + (max(missing_rows) + 1 if missing_rows else 0), starts[-1] + widths[-1])
    for label, a, b, h in nodes:
        wrong = marks is not None and (a, b) in marks.wrong_spans
        text = f"{printable(label)} ✗".strip() if wrong else printable(label)
        _bracket(grid, h - 1, starts[a], starts[b - 1] + widths[b - 1] - 1, text, _WRONG if wrong else _PLAIN)
    for (label, a, b), row in zip(missing, missing_rows):
        _bracket(grid, height + row, starts[a], starts[b - 1] + widths[b - 1] - 1, f"missing {printable(label)}".strip(),
                 _WRONG)
    return grid.render(color)


def _bracket(grid: _Grid, y: int, left: int, right: int, label: str, style: int) -> None:
    """``└──label──┘`` from cell ``left`` to ``right``; a label too long for it is shortened (``missing NP``
    to ``✗ NP``, then ``✗``) or, when it marks no error, left out."""
    for x in range(left, right + 1):
        grid.line(y, x, (_LEFT if x > left else _UP) | (_RIGHT if x < right else _UP), style)
    room = right - left - 1
    if display_width(label) > room and label.startswith("missing "):
        label = f"✗ {label[len('missing '):]}"
    if display_width(label) > room:
        label = "✗" if "✗" in label else ""
    if label:
        grid.put(y, left + 1 + (room - display_width(label)) // 2, label, style)


def _centred_row(total: int, starts: Sequence[int], widths: Sequence[int], texts: Sequence[str]) -> str:
    """One text per column, centred in it."""
    grid = _Grid(1, total)
    for start, width, text in zip(starts, widths, texts):
        grid.put(0, start + (width - display_width(text)) // 2, text)
    return grid.render(False)[0]


def caption_lines(text: str, width: int | None) -> list[str]:
    """``# text`` in lines of at most ``width`` cells, broken between words (a terminal would break it anywhere,
    mid-word); the lines after the first are indented under the text.  Only a word wider than a line is cut."""
    first, rest = "# ", "#   "
    if not width or display_width(first + text) <= width:
        return [first + text]
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and display_width((rest if lines else first) + line + " " + word) > width:
            lines.append((rest if lines else first) + line)
            line = ""
        line = f"{line} {word}" if line else word
        while len(line) > 1 and display_width((prefix := rest if lines else first) + line) > width:
            head = _cells(line, width - display_width(prefix))  # a word wider than a line
            lines.append(prefix + head)
            line = line[len(head):]
    if line:
        lines.append((rest if lines else first) + line)
    return lines


def _cells(text: str, cells: int) -> str:
    """The longest start of ``text`` that takes at most ``cells`` cells (at least one character)."""
    taken = 0
    for k, ch in enumerate(text):
        taken += display_width(ch)
        if taken > cells:
            return text[:max(k, 1)]
    return text


def sentences_text(sentences: Sequence[Sentence], marks: Sequence[Marks | None] | None = None, *,
                   color: bool = False, width: int | None = None) -> str:
    """Every sentence as a block: ``# caption``, its arcs, its words; blocks separated by a blank line; a
    sentence wider than ``width`` cells is wrapped (:func:`sentence_text`)."""
    blocks = []
    for ordinal, sentence in enumerate(sentences, start=1):
        mark = marks[ordinal - 1] if marks is not None else None
        lines = [*caption_lines(printable(caption(sentence, ordinal, mark)), width),
                 *sentence_text(sentence, mark, color=color, width=width)]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)
