"""``depinduce.convert(source, target)``: any gold as the MaltEval-safe CoNLL-U ``parse`` writes by default, or
as the tokenised text ``parse`` reads back with exactly the gold's tokens (``fmt="text"``).

``depinduce convert`` calls :func:`convert` itself.  The whole output is made before anything is written, so a
bad sentence is one located error and never a partial output.  Imports no torch.
"""

from __future__ import annotations

import io
from os import PathLike
from typing import TextIO

from depinduce.api.words import python_words
from depinduce.data.gold import for_scorers, read_gold
from depinduce.errors import InputError, UsageError
from depinduce.io import INPUT_FORMATS, write_sentences
from depinduce.io.lines import display_name
from depinduce.io.outputs import check_new_file, written_file
from depinduce.io.text_input import write_tokenized_text

CONVERT_FORMATS = ("conllu", "text")


@python_words
def convert(source: str | PathLike[str], target: str | PathLike[str] | TextIO, *, from_format: str = "auto",
            head_rules: str = "penn2malt", force: bool = False, fmt: str = "conllu") -> int:
    """Write the gold trees of ``source`` (``-``: stdin; ``from_format`` as ``eval`` detects it, or named) to
    ``target`` (a path or a stream) in the form ``parse`` writes by default — syntactic words only, ten columns,
    integer HEAD, DEPREL, DEPS ``_``, no comment — with the punctuation ``eval`` finds in ``source`` kept in the
    tags (see :mod:`depinduce.data.gold`).  PTB trees get heads by ``head_rules`` (``penn2malt``, ``collins``).
    ``fmt="text"`` writes the same sentences' words instead, one sentence a line under a first line that tells
    ``parse`` to keep them as they are (:data:`~depinduce.io.text_input.TOKENIZED_HEADER`): the input whose parse
    MaltEval can score against the CoNLL-U form.
    A named ``target`` that exists is replaced only with ``force``.  Returns how many sentences were written."""
    if from_format not in INPUT_FORMATS:
        raise UsageError(f"unknown input format '{from_format}'; choose one of {', '.join(INPUT_FORMATS)}")
    if fmt not in CONVERT_FORMATS:
        raise UsageError(f"unknown output format '{fmt}'; choose one of {', '.join(CONVERT_FORMATS)}")
    if isinstance(target, (str, PathLike)):
        check_new_file(target, force)  # before the work: a refusal costs nothing
    name = display_name(source)
    sentences = for_scorers(read_gold(str(source), from_format, head_rules=head_rules), name)
    text = io.StringIO()
    if fmt == "text":
        try:
            count = write_tokenized_text(sentences, text)
        except ValueError as exc:
            raise InputError(name, None, str(exc)) from None
    else:
        count = write_sentences(sentences, text, "conllu")
    if isinstance(target, (str, PathLike)):
        with written_file(target, force) as stream:
            stream.write(text.getvalue())
    else:
        target.write(text.getvalue())
    return count
