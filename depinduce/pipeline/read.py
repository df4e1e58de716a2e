"""The read step: input as sentences the backend's input view can take.

Text is one sentence per line, tokenised by :func:`depinduce.data.tokenize.tokenize_line` (the reader itself is
:mod:`depinduce.io.text_input`); CoNLL-U keeps its tokens and columns.  A backend whose input view reads more
than words (RNGTr's UPOS) refuses text, and input without the columns it reads, in one line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from os import PathLike

from depinduce.data.tokenize import tokenize_line
from depinduce.errors import UsageError
from depinduce.io import read_sentences
from depinduce.io import text_input
from depinduce.io.lines import display_name
from depinduce.models.base import Backend
from depinduce.structures.sentence import Sentence


def tokenizer(pretokenized: bool) -> text_input.Tokenizer:
    """``parse``'s tokeniser: whitespace only when ``pretokenized`` (``--tokenized``), else Treebank rules."""
    def tokenize(line: str) -> tuple[list[str], list[bool]]:
        tokens = tokenize_line(line, pretokenized=pretokenized)
        return tokens.forms, tokens.space_after

    return tokenize


def read_text(path: str, *, pretokenized: bool = False,
              on_blank: Callable[[list[int]], None] | None = None) -> list[Sentence]:
    """A text file, one sentence per line (blank lines skipped, ``sent_id`` = the line number; ``-``: stdin)."""
    return text_input.read_text(path, tokenizer(pretokenized), on_blank=on_blank)


def text_sentence(line: str, lineno: int, *, pretokenized: bool = False, label: str = "<input>") -> Sentence:
    """One line of text (stripped, not blank) as ``parse`` reads that line of a file."""
    return text_input.text_sentence(line, lineno, tokenizer(pretokenized), label=label)


def read_input(path: str | PathLike[str], backend: Backend, *, input_format: str = "text", pretokenized: bool = False,
               on_blank: Callable[[list[int]], None] | None = None) -> list[Sentence]:
    """``parse``'s input file as sentences for ``backend``: text or CoNLL-U, checked against its input view."""
    check_text_input(backend, input_format)
    if input_format == "text":
        sentences = read_text(os.fspath(path), pretokenized=pretokenized, on_blank=on_blank)
    else:
        sentences = read_sentences(path, fmt="conllu")
    check_input(backend, sentences, display_name(path))
    return sentences


def needs_conllu_message(backend: Backend) -> str:
    """Why text input is refused for a backend that reads UPOS tags (the CLI and the API say the same)."""
    return (f"model '{backend.name}' reads UPOS tags with the words: give CoNLL-U input "
            "(--input-format conllu)")


def check_text_input(backend: Backend, input_format: str) -> None:
    """Text cannot feed a backend whose input view reads more than words."""
    if input_format != "conllu" and not backend.input_view.reads_text:
        raise UsageError(needs_conllu_message(backend))


def check_input(backend: Backend, sentences: Sequence[Sentence], label: str) -> None:
    """Refuse, in one line located at ``label``, sentences without the columns the backend's view reads."""
    backend.input_view.check(backend, sentences, label)


def describe_blank_lines(label: str, lines: Sequence[int]) -> str:
    """The one-line warning for blank input lines (shown by ``parse``)."""
    shown = ", ".join(map(str, lines[:10])) + (f", … ({len(lines)} in all)" if len(lines) > 10 else "")
    return (f"warning: {label}: line{'s' if len(lines) > 1 else ''} {shown} held no sentence and "
            f"{'were' if len(lines) > 1 else 'was'} skipped; the output has one sentence per non-blank line "
            "(sent_id = its input line number in the full UD form)")
