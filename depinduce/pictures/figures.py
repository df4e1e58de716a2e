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

from collections.abc import Iterable, Sequence
from typing import TextIO

from depinduce.pictures.compare import Marks, compare, load_pictures, unscored_mask
from depinduce.pictures.layout import Arc, arc_levels, arcs_to_draw, caption, display_width, pack_rows, phrases
from depinduce.pictures.svg import (ARC_STEP, MARGIN, SMALL_FONT, STYLE, TREE_STEP, WORD_FONT, escape, sentence_svg,
                                    sentence_svg_parts)
from depinduce.structures.sentence import Sentence


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


__all__ = [
    "ARC_STEP", "MARGIN", "SMALL_FONT", "STYLE", "TREE_STEP", "WORD_FONT",
    "Arc", "Marks", "arc_levels", "arcs_to_draw", "caption", "compare", "display_width", "escape", "load_pictures",
    "pack_rows", "phrases", "sentence_svg", "sentence_svg_parts", "unscored_mask", "write_html", "write_svg",
    "write_svg_files",
]
