"""``depinduce show``: draw a parsed file's trees, as text arcs in the terminal or as an HTML page.

Thin: reading, comparing with a gold file and drawing are :func:`depinduce.api.drawing.show_text` (text) and
:func:`depinduce.api.drawing.show` (an HTML page, SVG files).
"""

from __future__ import annotations

import sys

import click

from depinduce.display import say


@click.command("show")
@click.argument("path", metavar="FILE")
@click.option("--gold", "gold_path", default=None, metavar="GOLD",
              help="A gold file over the same tokens: wrong heads are marked (✗→ the gold head), and in the "
                   "page wrong arcs are red beside the dashed gold arc, missing gold spans highlighted.")
@click.option("--html", "html_out", default=None, metavar="OUT.html|-",
              help="Write one self-contained HTML page (a figure per sentence) instead of text; '-' is stdout.")
@click.option("--sentence", type=click.IntRange(min=1), default=None, metavar="N",
              help="Only the N-th sentence (1-based).")
@click.option("--format", "fmt", type=click.Choice(("text", "html", "svg")), default=None,
              help="text (the default; arcs in the terminal), html (as --html; stdout without it) or svg (one "
                   "file per sentence into --out-dir).")
@click.option("--out-dir", default=None, metavar="DIR",
              help="--format svg: the folder for sentence-0001.svg, … (refused when it holds files, unless --force).")
@click.option("--width", type=click.IntRange(min=0), default=None, metavar="N",
              help="Text: wrap sentences wider than N columns into pieces (default: the terminal's width; 0: "
                   "never).")
@click.option("--force", is_flag=True, help="Overwrite an existing --html file, or write into a non-empty --out-dir.")
@click.option("--color/--no-color", default=None,
              help="Colour the text arcs (wrong red, punctuation dim). Default: only on a terminal.")
def show_command(path: str, gold_path: str | None, html_out: str | None, sentence: int | None, fmt: str | None,
                 out_dir: str | None, width: int | None, force: bool, color: bool | None) -> None:
    """Draw the dependency arcs (and trees) of FILE: CoNLL-U, CoNLL-X, word/tag/head columns or brackets."""
    # imported here, not above: `depinduce --help` must not wait for numpy and nltk
    import shutil

    from depinduce.api.drawing import show, show_text
    from depinduce.errors import UsageError

    fmt = fmt or ("html" if html_out is not None else "text")
    if html_out is not None and fmt != "html":
        raise UsageError(f"--html writes an HTML page; it cannot go with --format {fmt}")
    if (fmt == "svg") != (out_dir is not None):
        raise UsageError("--format svg writes one file per sentence into --out-dir DIR; give both or neither")
    if fmt == "svg":
        assert out_dir is not None
        count = show(path, out_dir, fmt="svg", gold=gold_path, sentence=sentence, force=force)
        say(f"{count} SVG file(s) written to {out_dir}")
        return
    if fmt == "text":
        use_color = sys.stdout.isatty() if color is None else color
        if width is None and sys.stdout.isatty():
            width = shutil.get_terminal_size().columns
        click.echo(show_text(path, gold=gold_path, sentence=sentence, color=use_color, width=width), nl=False,
                   color=use_color)
        return
    html_out = html_out or "-"
    show(path, sys.stdout if html_out == "-" else html_out, fmt="html", gold=gold_path, sentence=sentence,
         force=force)
