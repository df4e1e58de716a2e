"""Reading and writing sentences in the formats depinduce speaks.

Input formats (``read_sentences``): ``conllu``, ``conllx``, ``tabular`` (nltk dependency_treebank's
``word TAG head [label]``), ``brackets`` (PTB or unlabelled trees), or ``auto`` (see :mod:`.detect`).
Output formats (``write_sentences``): ``conllu``, ``conllx``, ``brackets``, ``jsonl``; writers stream, one
sentence at a time, so a generator of parsed sentences is never held in memory.  (The pictures ``html`` and
``svg`` are drawn by :mod:`depinduce.pictures`, a layer above this one.)

Every malformation in an input becomes an :class:`~depinduce.errors.InputError` ``FILE:LINE: problem``.
``check_trees`` (default True) also rejects heads that do not form a tree (several roots, a cycle, a word
heading itself); pass False to read predictions from decoders that may produce non-trees.  Heads outside
0..n are rejected either way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from os import PathLike
from typing import TextIO

from depinduce.structures.sentence import Sentence
from depinduce.errors import UsageError
from depinduce.io.brackets import parse_brackets_text, read_brackets, tree_to_brackets, write_brackets
from depinduce.io.conllu_format import format_conllu, parse_conllu_text, read_conllu, write_conllu, write_conllu_full
from depinduce.io.conllx import format_conllx, parse_conllx_text, read_conllx, write_conllx
from depinduce.io.detect import FORMATS, detect_format, detect_format_text
from depinduce.io.jsonl import sentence_to_json, write_jsonl
from depinduce.io.lines import display_name, read_text
from depinduce.io.tabular import parse_tabular_text, read_tabular

INPUT_FORMATS = ("auto",) + FORMATS
OUTPUT_FORMATS = ("conllu", "conllx", "brackets", "jsonl")

_WRITERS: dict[str, Callable[[Iterable[Sentence], TextIO], int]] = {
    "conllu": write_conllu,
    "conllu-ud": write_conllu_full,  # parse --full-ud
    "conllx": write_conllx,
    "brackets": write_brackets,
    "jsonl": write_jsonl,
}


def read_sentences(
    path: str | PathLike[str],
    fmt: str = "auto",
    *,
    check_trees: bool = True,
    bracket_labels: bool | None = None,
) -> list[Sentence]:
    """Read every sentence of ``path`` (``-`` = stdin) in format ``fmt``.

    ``bracket_labels`` forces bracketed trees to be read as labelled (True) or unlabelled (False); None lets
    the file decide (see :mod:`.brackets`).
    """
    if fmt not in INPUT_FORMATS:
        raise UsageError(f"unknown input format '{fmt}'; choose one of {', '.join(INPUT_FORMATS)}")
    # read once: stdin cannot be read again after detection
    return parse_sentences_text(read_text(path), display_name(path), fmt, check_trees=check_trees,
                                bracket_labels=bracket_labels)


def parse_sentences_text(
    text: str,
    name: str,
    fmt: str = "auto",
    *,
    check_trees: bool = True,
    bracket_labels: bool | None = None,
) -> list[Sentence]:
    """:func:`read_sentences` on text already read; ``name`` is the file name used in error messages."""
    if fmt == "auto":
        fmt = detect_format_text(text, name)
    if fmt == "conllu":
        return parse_conllu_text(text, name, check_trees=check_trees)
    if fmt == "conllx":
        return parse_conllx_text(text, name, check_trees=check_trees)
    if fmt == "tabular":
        return parse_tabular_text(text, name, check_trees=check_trees)
    return parse_brackets_text(text, name, labels=bracket_labels)


def write_sentences(sentences: Iterable[Sentence], stream: TextIO, fmt: str) -> int:
    """Write sentences to ``stream`` in ``fmt``, one at a time; returns how many were written.

    ``conllu`` is the MaltEval-safe form (syntactic words, no comments); ``conllu-ud`` the full UD form."""
    try:
        writer = _WRITERS[fmt]
    except KeyError:
        raise UsageError(f"unknown output format '{fmt}'; choose one of {', '.join(OUTPUT_FORMATS)}") from None
    return writer(sentences, stream)


__all__ = [
    "FORMATS",
    "INPUT_FORMATS",
    "OUTPUT_FORMATS",
    "detect_format",
    "detect_format_text",
    "format_conllu",
    "format_conllx",
    "parse_brackets_text",
    "parse_conllu_text",
    "parse_conllx_text",
    "parse_sentences_text",
    "parse_tabular_text",
    "read_brackets",
    "read_conllu",
    "read_conllx",
    "read_sentences",
    "read_tabular",
    "sentence_to_json",
    "tree_to_brackets",
    "write_brackets",
    "write_conllu",
    "write_conllu_full",
    "write_conllx",
    "write_jsonl",
    "write_sentences",
]
