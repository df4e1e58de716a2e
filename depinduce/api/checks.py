"""Checks on what a Python caller hands the API, so a wrong type is one line naming the item, not a TypeError
from deep inside a writer or a metric."""

from __future__ import annotations

from typing import Any

from depinduce.errors import UsageError
from depinduce.structures.sentence import Sentence


def checked_record(item: Any, role: str, number: int) -> Sentence:
    """``item`` (a Sentence, or what carries one as ``.sentence``) when its words are strings, its heads integers
    in 0..n (one per word) and its relations strings; else a UsageError naming ``role`` and the item."""
    sentence = getattr(item, "sentence", item)
    where = f"{role}: item {number}"
    if not isinstance(sentence, Sentence):
        raise UsageError(f"{where} is a {type(item).__name__}; give a file path or depinduce sentences (e.g. what "
                         "Parser.parse yields)")
    words = sentence.words
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise UsageError(f"{where}: words must be a list of strings")
    n = len(words)
    if sentence.heads is not None:
        bad = next((h for h in sentence.heads if isinstance(h, bool) or not isinstance(h, int)), None)
        if bad is not None or not isinstance(sentence.heads, list):
            raise UsageError(f"{where}: heads must be a list of integers (0 = root), not {bad!r}")
        if len(sentence.heads) != n or any(not 0 <= h <= n for h in sentence.heads):
            raise UsageError(f"{where}: heads must be {n} integers in 0..{n}, one per word")
    if sentence.deprels is not None and (not isinstance(sentence.deprels, list) or len(sentence.deprels) != n
                                         or not all(isinstance(r, str) for r in sentence.deprels)):
        raise UsageError(f"{where}: relations (deprels) must be {n} strings, one per word")
    return sentence


def check_types(**arguments: tuple[Any, tuple[type, ...]]) -> None:
    """Each ``name=(value, allowed types)`` has one of its types (None where ``type(None)`` is allowed; a bool
    is no int here), else a UsageError naming the parameter."""
    for name, (value, allowed) in arguments.items():
        if isinstance(value, bool) and bool not in allowed:
            ok = False
        else:
            ok = isinstance(value, allowed)
        if not ok:
            names = " or ".join("None" if t is type(None) else t.__name__ for t in allowed)
            raise UsageError(f"{name}: expected {names}, not {type(value).__name__} {value!r:.40}")
