"""Plain text as ``parse`` input: one sentence per line, read into Sentences that write back their own text.

The tokeniser is the caller's (``depinduce.data.tokenize``, a layer above this one): any function from a line to
its token forms and, per token, whether a space followed it.  Each sentence carries a conllu TokenList as
``source`` with ``SpaceAfter=No`` where the text had no space, so the CoNLL-U writer reproduces ``# text`` exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TextIO

import conllu.models

from depinduce.errors import InputError
from depinduce.io.lines import display_name
from depinduce.io.lines import read_text as read_lines_text
from depinduce.structures.sentence import Sentence

# A line (stripped, not blank) -> (token forms, whether a space followed each); ValueError for a line it refuses.
Tokenizer = Callable[[str], tuple[Sequence[str], Sequence[bool]]]

# The first line of the tokenised text ``depinduce convert --format text`` writes.  A text file that opens with it
# is split on whitespace only, so parsing it gives exactly the tokens of the gold it was written from (the Treebank
# rules would split ``Dunkin'`` and ``US$`` again, and MaltEval needs the gold's tokens).  Any other text is
# tokenised as before: a line of raw text is never read as this header by accident.
TOKENIZED_HEADER = "# depinduce tokenized text: one sentence per line, tokens separated by spaces"


def split_on_spaces(line: str) -> tuple[list[str], list[bool]]:
    """The tokeniser of a file that opens with :data:`TOKENIZED_HEADER`: whitespace only."""
    forms = line.split()
    return forms, [True] * len(forms)


def write_tokenized_text(sentences: Iterable[Sentence], stream: TextIO) -> int:
    """Write :data:`TOKENIZED_HEADER`, then each sentence's words on a line, separated by single spaces; returns
    how many sentences were written.  A word with whitespace in it cannot be written so (ValueError)."""
    stream.write(TOKENIZED_HEADER + "\n")
    count = 0
    for count, sentence in enumerate(sentences, start=1):
        for word in sentence.words:
            if not word or any(ch.isspace() for ch in word):
                raise ValueError(f"sentence {count}: the word {word!r} is empty or holds whitespace, so it cannot "
                                 "be written as space-separated tokens")
        stream.write(" ".join(sentence.words) + "\n")
    return count


def read_text(path: str, tokenize: Tokenizer, *, on_blank: Callable[[list[int]], None] | None = None
              ) -> list[Sentence]:
    """One sentence per line; blank lines are skipped and ``sent_id`` is the input line number (``-``: stdin).
    A file whose first line is :data:`TOKENIZED_HEADER` is split on whitespace instead of by ``tokenize``.

    ``on_blank`` receives the numbers of the blank lines (when there are any), so the caller can warn that the
    output no longer lines up with the input line for line."""
    label = display_name(path)
    sentences: list[Sentence] = []
    blank: list[int] = []
    lines = read_lines_text(path).split("\n")
    if lines[0].rstrip() == TOKENIZED_HEADER:
        tokenize = split_on_spaces
    for lineno, raw_line in enumerate(lines, start=1):
        line = raw_line.strip()
        if lineno == 1 and tokenize is split_on_spaces:
            continue
        if not line:
            blank.append(lineno)
            continue
        sentences.append(text_sentence(line, lineno, tokenize, label=label))
    if blank and blank[-1] == lineno and raw_line == "":
        blank.pop()  # the final newline ends the last line; it is not a blank line
    if not sentences:
        raise InputError(label, None, "no sentences (the input is empty or blank)")
    if blank and on_blank is not None:
        on_blank(blank)
    return sentences


def text_sentence(line: str, lineno: int, tokenize: Tokenizer, *, label: str = "<input>") -> Sentence:
    """One line of text (already stripped, not blank) as a sentence, tokenised by ``tokenize``; a line the
    tokeniser refuses is an error located at ``label``:``lineno``.

    Shared by :func:`read_text` and the Python API, so a string parsed from a notebook gets exactly the tokens,
    ``sent_id`` and ``SpaceAfter`` the command line gives the same line of a file."""
    try:
        forms, space_after = tokenize(line)
    except ValueError as exc:
        raise InputError(label, lineno, str(exc)) from exc
    return tokens_sentence(forms, space_after, sent_id=str(lineno), text=line, line=lineno)


def tokens_sentence(forms: Sequence[str], space_after: Sequence[bool], *, sent_id: str, text: str,
                    line: int | None = None) -> Sentence:
    """A tokenised sentence whose ``source`` is a conllu TokenList with ``SpaceAfter=No`` where the text had no
    space, so the CoNLL-U writer reproduces ``# text`` exactly."""
    source = conllu.models.TokenList(
        [
            conllu.models.Token(
                id=i,
                form=form,
                lemma="_",
                upos=None,
                xpos=None,
                feats=None,
                head=None,
                deprel=None,
                deps=None,
                misc=None if space else {"SpaceAfter": "No"},
            )
            for i, (form, space) in enumerate(zip(forms, space_after), start=1)
        ],
        metadata={"sent_id": sent_id, "text": text},
    )
    return Sentence(words=list(forms), sent_id=sent_id, text=text, line=line, source=source)
