"""``depinduce show``: draw a parsed file's trees, as text arcs in the terminal or as an HTML page.

Thin: reading, comparing with a gold file and drawing are :mod:`depinduce.pictures.figures` and
:mod:`depinduce.pictures.terminal`.
"""

from __future__ import annotations

import sys

import click

from depinduce.io.lines import display_name


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

    from depinduce.errors import UsageError
    from depinduce.io.outputs import check_new_file, check_new_folder, written_file
    from depinduce.pictures.figures import load_pictures, write_html, write_svg_files
    from depinduce.pictures.terminal import sentences_text

    fmt = fmt or ("html" if html_out is not None else "text")
    if html_out is not None and fmt != "html":
        raise UsageError(f"--html writes an HTML page; it cannot go with --format {fmt}")
    if (fmt == "svg") != (out_dir is not None):
        raise UsageError("--format svg writes one file per sentence into --out-dir DIR; give both or neither")
    if html_out not in (None, "-"):
        check_new_file(html_out, force)  # before reading: a refusal costs nothing
    if out_dir is not None:
        check_new_folder(out_dir, force)
    sentences, marks = load_pictures(path, gold_path, sentence)
    if fmt == "svg":
        assert out_dir is not None
        written = write_svg_files(sentences, out_dir, marks, first=sentence or 1)
        click.echo(f"{len(written)} SVG file(s) written to {out_dir}", err=True)
        return
    if fmt == "text":
        use_color = sys.stdout.isatty() if color is None else color
        if width is None and sys.stdout.isatty():
            width = shutil.get_terminal_size().columns
        click.echo(sentences_text(sentences, marks, color=use_color, width=width or None), nl=False,
                   color=use_color)
        return
    html_out = html_out or "-"
    title = f"depinduce show {display_name(path)}" + (f" --gold {display_name(gold_path)}" if gold_path else "")
    if html_out == "-":
        write_html(sentences, sys.stdout, marks, title=title)
        return
    with written_file(html_out, force) as stream:
        write_html(sentences, stream, marks, title=title)
