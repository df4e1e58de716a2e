"""The 3/4-column ``word TAG head [label]`` format of nltk's dependency_treebank ``.dp`` files.

One word per line, sentences separated by blank lines.  Columns are tab-separated; a line without any tab is
split on runs of spaces (words never contain spaces in this format).  The first word line fixes the width for
the whole file (3, or 4 with a dependency label), so a stray column is reported rather than guessed at.
"""

from __future__ import annotations

from depinduce.structures.sentence import Sentence
from depinduce.errors import InputError
from depinduce.io.heads import check_heads, collect_heads, parse_head
from depinduce.io.lines import Block, display_name, no_sentences, read_text, split_blocks, split_lines


def split_columns(text: str) -> list[str]:
    """Tab-separated columns, or space-separated when the line has no tab."""
    return text.split("\t") if "\t" in text else text.split()


def read_tabular(path: str, *, check_trees: bool = True) -> list[Sentence]:
    """Read a word/tag/head[/label] file (``-`` = stdin)."""
    name = display_name(path)
    return parse_tabular_text(read_text(path), name, check_trees=check_trees)


def parse_tabular_text(text: str, name: str, *, check_trees: bool = True) -> list[Sentence]:
    """Parse word/tag/head[/label] text; ``name`` is the file name used in error messages."""
    blocks = split_blocks(split_lines(text))
    if not blocks:
        raise no_sentences(name)
    first = blocks[0].lines[0]
    width = len(split_columns(first.text))
    if width not in (3, 4):
        raise InputError(name, first.number, f"expected 3 or 4 columns (word, tag, head[, label]), found {width}")
    return [_read_block(block, name, width, check_trees) for block in blocks]


def _read_block(block: Block, name: str, width: int, check_trees: bool) -> Sentence:
    rows: list[list[str]] = []
    for line in block.lines:
        cols = split_columns(line.text)
        if len(cols) != width:
            raise InputError(name, line.number, f"expected {width} columns like the first line, found {len(cols)}")
        if any(not c for c in cols):
            raise InputError(name, line.number, "empty column")
        rows.append(cols)
    numbers = [line.number for line in block.lines]
    heads = collect_heads([parse_head(r[2], name, n) for r, n in zip(rows, numbers)], numbers, name)
    if heads is not None:
        check_heads(heads, numbers, name, check_trees=check_trees)
    return Sentence(
        words=[r[0] for r in rows],
        xpos=[r[1] for r in rows],
        heads=heads,
        deprels=[r[3] for r in rows] if width == 4 else None,
        line=block.start,
        token_lines=numbers,
    )
