"""A reader that applies the rules of MaltEval's (2014-10-05) input reader, for tests of ``parse``'s default
output: tab-separated token lines with at least 8 columns, FORM in column 2, an integer HEAD in column 7, a
DEPREL in column 8, PHEAD (column 9, where DEPS is in CoNLL-U) ``_`` or an integer (MaltEval aborts on an enhanced
graph's ``0:root``), one empty line between sentences — and nothing else (no comment, multiword-token or
empty-node line, no stray blank line)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

# The real MaltEval (2014-10-05): MaltEval-dist-20141005.zip from the MaltParser site; never part of the repository.
MALTEVAL_JAR = Path(os.environ.get("MALTEVAL_JAR", "/tmp/malteval/lib/MaltEval.jar"))


class MaltEvalError(ValueError):
    pass


def read_malteval(text: str) -> list[list[tuple[str, int, str]]]:
    """Sentences as lists of (form, head, deprel); raises :class:`MaltEvalError` on what MaltEval rejects."""
    sentences: list[list[tuple[str, int, str]]] = []
    current: list[tuple[str, int, str]] = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the file's final newline
    for number, line in enumerate(lines, start=1):
        if line == "":
            if not current:
                raise MaltEvalError(f"line {number}: empty line outside a sentence")
            sentences.append(current)
            current = []
            continue
        cols = line.split("\t")
        if len(cols) < 8:
            raise MaltEvalError(f"line {number}: an attribute is missing ({len(cols)} columns)")
        if not cols[0].isdigit() or int(cols[0]) != len(current) + 1:
            raise MaltEvalError(f"line {number}: ID {cols[0]!r} is not the next word number")
        if not cols[1]:
            raise MaltEvalError(f"line {number}: empty FORM")
        try:
            head = int(cols[6])
        except ValueError:
            raise MaltEvalError(f"line {number}: Head value {cols[6]} not valid") from None
        if not cols[7] or cols[7] == "_":
            raise MaltEvalError(f"line {number}: DEPREL missing")
        if len(cols) > 8 and cols[8] != "_" and not cols[8].isdigit():
            raise MaltEvalError(f"line {number}: PHead value {cols[8]} not valid")
        current.append((cols[1], head, cols[7]))
    if current:
        raise MaltEvalError("the last sentence is not ended by an empty line")
    for k, sentence in enumerate(sentences, start=1):
        for form, head, _ in sentence:
            if not 0 <= head <= len(sentence):
                raise MaltEvalError(f"sentence {k}: head {head} of {form!r} is outside 0..{len(sentence)}")
    return sentences


def is_tree(heads: list[int]) -> bool:
    """Exactly one root and every word reaches it."""
    if sum(h == 0 for h in heads) != 1:
        return False
    for start in range(1, len(heads) + 1):
        seen, node = set(), start
        while node != 0:
            if node in seen:
                return False
            seen.add(node)
            node = heads[node - 1]
    return True


def require_malteval() -> None:
    """Skip, saying what is missing, without java and MaltEval's jar."""
    if shutil.which("java") is None or not MALTEVAL_JAR.is_file():
        pytest.skip(f"needs java and MaltEval's jar (MALTEVAL_JAR or {MALTEVAL_JAR}); MaltEval-dist-20141005.zip "
                    "from the MaltParser site")


def malteval(gold: Path, pred: Path, *flags: str) -> tuple[float, int]:
    """The real MaltEval's score and token count.  It exits 0 even when it aborts (a token mismatch prints
    "Evaluation aborted"), so its text is checked, not only its exit code."""
    result = subprocess.run(["java", "-jar", str(MALTEVAL_JAR), "-g", str(gold), "-s", str(pred),
                             "--pattern", "0.000000", *flags], capture_output=True, text=True, timeout=300)
    text = result.stdout + result.stderr
    mean = re.search(r"^(\d\.\d+|[01])\s+Row mean$", text, re.M)
    count = re.search(r"^(\d+)\s+Row count$", text, re.M)
    assert result.returncode == 0 and mean and count and "abort" not in text.lower(), text
    return float(mean[1]), int(count[1])
