"""Plain text as ``parse`` input: one sentence per line, read into Sentences that write back their own text.

The tokeniser is the caller's (``depinduce.data.tokenize``, a layer above this one): any function from a line to
its token forms and, per token, whether a space followed it.  Each sentence carries a conllu TokenList as
``source`` with ``SpaceAfter=No`` where the text had no space, so the CoNLL-U writer reproduces ``# text`` exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import conllu.models

from depinduce.errors import InputError
from depinduce.io.lines import display_name
from depinduce.io.lines import read_text as read_lines_text
from depinduce.structures.sentence import Sentence

# A line (stripped, not blank) -> (token forms, whether a space followed each); ValueError for a line it refuses.
Tokenizer = Callable[[str], tuple[Sequence[str], Sequence[bool]]]


def read_text(path: str, tokenize: Tokenizer, *, on_blank: Callable[[list[int]], None] | None = None
              ) -> list[Sentence]:
    """One sentence per line; blank lines are skipped and ``sent_id`` is the input line number (``-``: stdin).

    ``on_blank`` receives the numbers of the blank lines (when there are any), so the caller can warn that the
    output no longer lines up with the input line for line."""
    label = display_name(path)
    sentences: list[Sentence] = []
    blank: list[int] = []
    for lineno, raw_line in enumerate(read_lines_text(path).split("\n"), start=1):
        line = raw_line.strip()
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
