"""``depinduce show`` from Python: a parsed file's trees as text arcs (:func:`show_text`), as one HTML page or as
one SVG file per sentence (:func:`show`), compared with a gold file when one is given.

The command calls these, so the text and pages are the command's bytes.  Reading, pairing with the gold and
drawing are :mod:`depinduce.pictures`; nothing here imports torch.
"""

from __future__ import annotations

import os
from os import PathLike
from typing import Any, TextIO

from depinduce.api.words import python_words
from depinduce.errors import UsageError

PICTURES = ("html", "svg")


def _name(path: str | PathLike[str] | None) -> str | None:
    return None if path is None else os.fspath(path)


@python_words
def show_text(path: str | PathLike[str], *, gold: str | PathLike[str] | None = None, sentence: int | None = None,
              color: bool = False, width: int | None = None) -> str:
    """The text ``depinduce show FILE`` prints: each sentence's caption, arcs and words (``color``: wrong heads
    red, punctuation dim, as ANSI escapes; ``width``: wrap wider sentences into pieces, None or 0 never).
    ``gold`` marks wrong heads against a gold file over the same tokens; ``sentence`` (1-based) draws only that
    one."""
    from depinduce.pictures.figures import load_pictures
    from depinduce.pictures.terminal import sentences_text

    sentences, marks = load_pictures(os.fspath(path), _name(gold), sentence)
    return sentences_text(sentences, marks, color=color, width=width or None)


@python_words
def show(path: str | PathLike[str], target: str | PathLike[str] | TextIO, *, fmt: str = "html",
         gold: str | PathLike[str] | None = None, sentence: int | None = None, force: bool = False) -> int:
    """``depinduce show FILE --format html|svg``: ``html`` writes one self-contained page (a figure per sentence)
    to ``target``, a file or a text stream; ``svg`` writes ``sentence-0001.svg``, … into the folder ``target``.
    ``gold`` marks wrong arcs and missing gold spans; ``sentence`` (1-based) draws only that one.  An existing
    file, or a folder that holds files, is written only with ``force`` (checked before the file is read).
    Returns how many sentences were drawn."""
    from depinduce.io.lines import display_name
    from depinduce.io.outputs import check_new_file, check_new_folder, written_file
    from depinduce.pictures.figures import load_pictures, write_html, write_svg_files

    if fmt not in PICTURES:
        raise UsageError(f"fmt: expected one of {', '.join(PICTURES)}, not {fmt!r}")

    def pictures() -> tuple[list[Any], list[Any] | None]:  # the sentences and their marks
        return load_pictures(os.fspath(path), _name(gold), sentence)

    if fmt == "svg":
        if not isinstance(target, (str, PathLike)):
            raise UsageError(f"target: fmt='svg' writes one file per sentence; give a folder, not a "
                             f"{type(target).__name__}")
        folder = os.fspath(target)
        check_new_folder(folder, force)  # before reading: a refusal costs nothing
        sentences, marks = pictures()
        return len(write_svg_files(sentences, folder, marks, first=sentence or 1))
    title = f"depinduce show {display_name(path)}" + (f" --gold {display_name(gold)}" if gold else "")
    if isinstance(target, (str, PathLike)):
        check_new_file(target, force)
        sentences, marks = pictures()
        with written_file(target, force) as stream:
            return write_html(sentences, stream, marks, title=title)
    if not callable(getattr(target, "write", None)):
        raise UsageError(f"target: expected a file name or a text stream, not a {type(target).__name__}")
    sentences, marks = pictures()
    return write_html(sentences, target, marks, title=title)
