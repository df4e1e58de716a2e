"""JSON Lines output: one object per sentence, for programs rather than people.

Keys: ``sent_id`` (the sentence's own id, else its 1-based ordinal in the output, as the CoNLL-U writer
generates), ``words``, ``heads`` (1-based, 0 = ROOT, or null), ``deprels`` (as given, or null — unlike the
CoNLL writers nothing is invented), ``tree`` (the bracket string of :func:`tree_to_brackets`, or null); with
``parse --probs`` also ``head_probs``: per word, its head distribution ``[p(ROOT), p(word 1), …, p(word n)]``
(6 decimals), or null for punctuation, which depinduce attaches by rule rather than by the model.
Non-ASCII characters are written as themselves (UTF-8), not escaped, but for the controls, separators and
invisible characters of :func:`depinduce.display.json_text`: a record is one line whatever splits lines.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TextIO

from depinduce.display import json_text
from depinduce.structures.sentence import Sentence
from depinduce.io.brackets import tree_to_brackets


def sentence_to_json(sentence: Sentence, ordinal: int = 1) -> dict[str, Any]:
    """The JSON object for one sentence."""
    record: dict[str, Any] = {
        "sent_id": sentence.sent_id if sentence.sent_id is not None else str(ordinal),
        "words": list(sentence.words),
        "heads": list(sentence.heads) if sentence.heads is not None else None,
        "deprels": list(sentence.deprels) if sentence.deprels is not None else None,
        "tree": tree_to_brackets(sentence.tree) if sentence.tree is not None else None,
    }
    if sentence.head_probs is not None:
        record["head_probs"] = [None if row is None else [round(p, 6) for p in row] for row in sentence.head_probs]
    return record


def write_jsonl(sentences: Iterable[Sentence], stream: TextIO) -> int:
    """Write one JSON object per line; returns how many sentences were written."""
    count = 0
    for count, sentence in enumerate(sentences, start=1):
        stream.write(json_text(sentence_to_json(sentence, count)) + "\n")
    return count
