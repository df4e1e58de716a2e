"""``depinduce show``: draw a parsed file's trees, as text arcs in the terminal or as an HTML page.

Thin: reading, comparing with a gold file and drawing are :mod:`depinduce.pictures.figures` and
:mod:`depinduce.pictures.terminal`.
"""

from __future__ import annotations

import sys

import click

from depinduce.errors import ResourceError
from depinduce.io.lines import display_name
from depinduce.pictures.figures import load_pictures, write_html
from depinduce.pictures.terminal import sentences_text


@click.command("show")
@click.argument("path", metavar="FILE")
@click.option("--gold", "gold_path", default=None, metavar="GOLD",
              help="A gold file over the same tokens: wrong heads are marked (✗→ the gold head), and in the "
                   "page wrong arcs are red beside the dashed gold arc, missing gold spans highlighted.")
@click.option("--html", "html_out", default=None, metavar="OUT.html|-",
              help="Write one self-contained HTML page (a figure per sentence) instead of text; '-' is stdout.")
@click.option("--sentence", type=click.IntRange(min=1), default=None, metavar="N",
              help="Only the N-th sentence (1-based).")
@click.option("--color/--no-color", default=None,
              help="Colour the text arcs (wrong red, punctuation dim). Default: only on a terminal.")
def show_command(path: str, gold_path: str | None, html_out: str | None, sentence: int | None,
                 color: bool | None) -> None:
    """Draw the dependency arcs (and trees) of FILE: CoNLL-U, CoNLL-X, word/tag/head columns or brackets."""
    sentences, marks = load_pictures(path, gold_path, sentence)
    if html_out is None:
        use_color = sys.stdout.isatty() if color is None else color
        click.echo(sentences_text(sentences, marks, color=use_color), nl=False, color=use_color)
        return
    title = f"depinduce show {display_name(path)}" + (f" --gold {display_name(gold_path)}" if gold_path else "")
    if html_out == "-":
        write_html(sentences, sys.stdout, marks, title=title)
        return
    try:
        with open(html_out, "w", encoding="utf-8") as stream:
            write_html(sentences, stream, marks, title=title)
    except OSError as exc:
        raise ResourceError(f"{html_out}: cannot write ({exc.strerror or exc})") from exc
