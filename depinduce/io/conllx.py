"""CoNLL-X (the CoNLL 2006 shared-task format), written exactly as MaltEval and eval.pl read it.

Columns: ID FORM LEMMA CPOSTAG POSTAG FEATS HEAD DEPREL PHEAD PDEPREL, tab-separated; no comments, no
multiword or empty-node lines; every sentence followed by exactly one empty line (so the file ends with one).

Tag columns: CPOSTAG gets the UPOS tag (falling back to XPOS), POSTAG the XPOS tag (falling back to UPOS),
``_`` when the sentence has neither.  DEPREL is never ``_``: an unlabelled parse writes ``root``/``dep``.

The reader accepts 10 columns, or 8 (PHEAD/PDEPREL left off, as some tools write).  POSTAG becomes ``xpos``;
CPOSTAG becomes ``upos`` only when every value is a UD tag (otherwise it is a coarse treebank tag, and becomes
``xpos`` if POSTAG is empty).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TextIO

from conllu.models import TokenList
from conllu.serializer import serialize_field

from depinduce.structures.sentence import Sentence
from depinduce.errors import InputError, UsageError
from depinduce.io.conllu_format import UPOS_TAGS, default_deprels
from depinduce.io.heads import check_heads, collect_heads, parse_head
from depinduce.io.lines import Block, display_name, no_sentences, read_text, split_blocks, split_lines

COLUMNS = ("ID", "FORM", "LEMMA", "CPOSTAG", "POSTAG", "FEATS", "HEAD", "DEPREL", "PHEAD", "PDEPREL")


# --------------------------------------------------------------------------------------------------- reading


def read_conllx(path: str, *, check_trees: bool = True) -> list[Sentence]:
    """Read a CoNLL-X file (``-`` = stdin)."""
    name = display_name(path)
    return parse_conllx_text(read_text(path), name, check_trees=check_trees)


def parse_conllx_text(text: str, name: str, *, check_trees: bool = True) -> list[Sentence]:
    """Parse CoNLL-X text; ``name`` is the file name used in error messages."""
    blocks = split_blocks(split_lines(text))
    if not blocks:
        raise no_sentences(name)
    width = len(blocks[0].lines[0].text.split("\t"))
    if width not in (8, 10):
        width = 10  # report the first line against the standard width
    return [_read_block(block, name, width, check_trees) for block in blocks]


def _column(values: list[str]) -> list[str] | None:
    return None if all(v == "_" for v in values) else values


def _read_block(block: Block, name: str, width: int, check_trees: bool) -> Sentence:
    rows: list[list[str]] = []
    for line in block.lines:
        cols = line.text.split("\t")
        if len(cols) != width:
            raise InputError(name, line.number, f"expected {width} tab-separated columns, found {len(cols)}")
        for col, value in zip(COLUMNS, cols):
            if not value:
                raise InputError(name, line.number, f"column {col} is empty (use '_' for no value)")
        if cols[0] != str(len(rows) + 1):
            raise InputError(name, line.number, f"ID '{cols[0]}' out of sequence; expected {len(rows) + 1}")
        rows.append(cols)
    numbers = [line.number for line in block.lines]
    heads = collect_heads([parse_head(r[6], name, n) for r, n in zip(rows, numbers)], numbers, name)
    if heads is not None:
        check_heads(heads, numbers, name, check_trees=check_trees)
    cpos = _column([r[3] for r in rows])
    pos = _column([r[4] for r in rows])
    upos = cpos if cpos is not None and all(t in UPOS_TAGS or t == "_" for t in cpos) else None
    xpos = pos if pos is not None else (cpos if upos is None else None)
    return Sentence(
        words=[r[1] for r in rows],
        xpos=xpos,
        upos=upos,
        heads=heads,
        deprels=_column([r[7] for r in rows]),
        line=block.start,
        token_lines=numbers,
    )


# --------------------------------------------------------------------------------------------------- writing


def _field(value: object) -> str:
    """A column value: ``_`` when empty; tabs and line breaks (which would break the columns) are refused."""
    text = "_" if value is None else str(value)
    if not text:
        return "_"
    if "\t" in text or "\n" in text or "\r" in text:
        raise UsageError(f"cannot write {text!r} in a CoNLL-X column (it contains a tab or line break)")
    return text


def format_conllx(sentence: Sentence, ordinal: int = 1) -> str:
    """One sentence as CoNLL-X lines followed by the empty line that ends it."""
    n = len(sentence.words)
    if n == 0:
        raise UsageError(f"sentence {ordinal}: cannot write an empty sentence in CoNLL-X")
    if sentence.heads is None:
        raise UsageError(f"sentence {ordinal}: has no heads to write in CoNLL-X")
    if len(sentence.heads) != n:
        raise UsageError(f"sentence {ordinal}: {len(sentence.heads)} heads for {n} words")
    upos = sentence.upos or ["_"] * n
    xpos = sentence.xpos or ["_"] * n
    fallback = default_deprels(sentence.heads)
    deprels = sentence.deprels or fallback
    if len(deprels) != n:
        raise UsageError(f"sentence {ordinal}: {len(deprels)} labels for {n} words")
    source_words = []
    if isinstance(sentence.source, TokenList):
        source_words = [t for t in sentence.source if isinstance(t.get("id"), int)]
    if len(source_words) != n:
        source_words = []
    lines = []
    for i in range(n):
        coarse = upos[i] if upos[i] not in ("", "_") else xpos[i]
        fine = xpos[i] if xpos[i] not in ("", "_") else upos[i]
        label = deprels[i] if deprels[i] not in (None, "", "_") else fallback[i]
        lemma = source_words[i].get("lemma") if source_words else None
        feats = serialize_field(source_words[i].get("feats")) if source_words else None
        cols = [str(i + 1), sentence.words[i], lemma, coarse, fine, feats, str(sentence.heads[i]), label, "_", "_"]
        lines.append("\t".join(_field(c) for c in cols))
    return "\n".join(lines) + "\n\n"


def write_conllx(sentences: Iterable[Sentence], stream: TextIO) -> int:
    """Write sentences as CoNLL-X, one at a time; returns how many were written."""
    count = 0
    for count, sentence in enumerate(sentences, start=1):
        stream.write(format_conllx(sentence, count))
    return count
