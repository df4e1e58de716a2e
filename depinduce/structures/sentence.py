"""The one sentence record that flows from readers through models to writers and metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # nltk's package import loads all of nltk (and scipy where installed): not for a record type
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
    # The input line of each word (CoNLL-family readers), so an error about one token can point at it.
    token_lines: list[int] | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    source: Any = None
    # ``parse --probs``: per word, its head distribution over ROOT (index 0) and the n words (index j = word j),
    # or None for a token the model did not see (punctuation, attached by depinduce's rule, not by the model).
    head_probs: list[list[float] | None] | None = None

    def head_prob(self, index: int) -> float | None:
        """The probability of word ``index``'s (0-based) chosen head, when it has a head distribution."""
        if self.head_probs is None or self.heads is None:
            return None
        row = self.head_probs[index]
        return None if row is None else row[self.heads[index]]

    def __len__(self) -> int:
        return len(self.words)

    def line_of(self, index: int) -> int | None:
        """The input line of word ``index`` (0-based) when the reader knew it, else the sentence's line."""
        if self.token_lines is not None and 0 <= index < len(self.token_lines):
            return self.token_lines[index]
        return self.line
