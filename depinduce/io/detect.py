"""Telling the input formats apart from the text itself.

Rules, applied in order (the first that fires wins):
1. the first non-blank character is ``(`` and the first line has no tab → ``brackets`` (a tab means a
   word/tag/head line whose word is a bracket);
2. a comment line (``#`` not followed by a tab: ``#<TAB>#<TAB>5`` is the PTB word ``#``), or a multiword
   (``3-4``) or empty-node (``8.1``) ID on a 10-column line → ``conllu`` (CoNLL-X has neither);
3. the width of the first token line decides: 10 columns → ``conllu`` when the 4th column holds only UD tags
   (or ``_``) in the first sentences, else ``conllx`` (a CoNLL-X file with UD tags reads identically either way);
   8 → ``conllx``; 3 or 4 with an integer (or ``_``) third column → ``tabular``.
Anything else is an InputError at the first line, asking for an explicit format.
"""

from __future__ import annotations

import re
from os import PathLike

from depinduce.errors import InputError
from depinduce.io.conllu_format import UPOS_TAGS
from depinduce.io.lines import Line, display_name, no_sentences, read_text, split_lines
from depinduce.io.tabular import split_columns

FORMATS = ("conllu", "conllx", "tabular", "brackets")
SNIFF_LINES = 2000  # enough for several sentences; a decision never depends on the rest of a large file

_SPECIAL_ID = re.compile(r"[0-9]+(-|\.)[0-9]+")
_HEAD_LIKE = re.compile(r"[0-9]+|_")


def detect_format(path: str | PathLike[str]) -> str:
    """The format of the file at ``path`` (``-`` reads standard input, which is then consumed)."""
    return detect_format_text(read_text(path), display_name(path))


def detect_format_text(text: str, name: str) -> str:
    """The format of ``text``; ``name`` is the file name used in error messages."""
    head = "\n".join(text.split("\n", SNIFF_LINES)[:SNIFF_LINES])
    lines = [line for line in split_lines(head) if line.text.strip()]
    if not lines:
        raise no_sentences(name)
    if lines[0].text.lstrip().startswith("(") and "\t" not in lines[0].text:
        return "brackets"
    token_lines: list[Line] = []
    for line in lines:
        if line.text.startswith("#") and not line.text.startswith("#\t"):
            return "conllu"
        token_lines.append(line)
        cols = line.text.split("\t")
        if len(cols) == 10 and _SPECIAL_ID.fullmatch(cols[0]):  # "1.5<TAB>CD<TAB>3" is a word, not an ID
            return "conllu"
    first = token_lines[0]
    tab_cols = first.text.split("\t")
    if len(tab_cols) == 10:
        fourth = [cols[3] for cols in (t.text.split("\t") for t in token_lines) if len(cols) == 10]
        return "conllu" if all(tag in UPOS_TAGS or tag == "_" for tag in fourth) else "conllx"
    if len(tab_cols) == 8:
        return "conllx"
    cols = split_columns(first.text)
    if len(cols) in (3, 4) and _HEAD_LIKE.fullmatch(cols[2]):
        return "tabular"
    raise InputError(
        name,
        first.number,
        f"cannot tell the format from a line of {len(cols)} columns (CoNLL-U/CoNLL-X have 10, the word/tag/head "
        "format 3 or 4, bracketed trees start with '('); name the format explicitly",
    )
