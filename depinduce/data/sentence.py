"""The one sentence record that flows from readers through models to writers and metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nltk import Tree


@dataclass
class Sentence:
    """A tokenised sentence with whatever annotation its source carried.

    Positions are 0-based in the lists; ``heads`` use the CoNLL convention (1-based head index, 0 = ROOT), so
    ``heads[i]`` is the head of word ``i + 1``.  ``tree`` is a gold constituency tree over the same words
    (PTB-style, preterminals carry the tags).  ``source`` keeps the reader's native object (e.g. a
    ``conllu.TokenList``) so writers can round-trip columns depinduce does not model.
    """

    words: list[str]
    xpos: list[str] | None = None
    upos: list[str] | None = None
    heads: list[int] | None = None
    deprels: list[str] | None = None
    tree: Tree | None = None
    sent_id: str | None = None
    text: str | None = None
    line: int | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    source: Any = None

    def __len__(self) -> int:
        return len(self.words)
