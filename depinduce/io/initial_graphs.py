"""Initial dependency graphs for refining parsers (RNGTr ``--init FILE``, ``--init-train``, ``--init-dev``).

An initial graph is any parse of the very sentences being parsed or trained on — a CoNLL-U file written by
``depinduce parse`` with any model, or by another parser.  It must hold the same sentences in the same order with
the same tokens (forms compared case-insensitively, as the evaluator does), or the graph would describe other
words: any mismatch is a one-line error naming the file, line and token.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from depinduce.structures.sentence import Sentence
from depinduce.errors import InputError
from depinduce.io.conllu_format import read_conllu

InitialGraph = tuple[list[int], list[str]]  # CoNLL heads (1-based, 0 = ROOT) and label strings


def read_initial_parse(path: str | Path, sentences: Sequence[Sentence]) -> list[InitialGraph]:
    """(heads, labels) per sentence of ``path``, checked token by token against ``sentences``; a file without
    labels gives ``_`` labels (an unlabelled graph is a valid start)."""
    name = str(path)
    parsed = read_conllu(name)
    if len(parsed) != len(sentences):
        raise InputError(name, None, f"has {len(parsed)} sentences, the input has {len(sentences)}")
    return [initial_graph(init, target, k, name, init.line)
            for k, (init, target) in enumerate(zip(parsed, sentences), start=1)]


def initial_graph(init: Sentence, target: Sentence, number: int, name: str, line: int | None) -> InitialGraph:
    """One sentence's initial graph, refused unless ``init`` holds ``target``'s tokens and has heads.

    ``number`` is the sentence's 1-based position, ``name`` the graphs' source and ``line`` where ``init`` starts
    in it (None for graphs in memory), for the error line."""
    if [w.lower() for w in init.words] != [w.lower() for w in target.words]:
        first = next((i for i, (a, b) in enumerate(zip(init.words, target.words)) if a.lower() != b.lower()),
                     min(len(init.words), len(target.words)))
        seen = init.words[first] if first < len(init.words) else "<end of sentence>"
        wanted = target.words[first] if first < len(target.words) else "<end of sentence>"
        raise InputError(name, line, f"sentence {number} differs from the input at token {first + 1}: "
                                          f"{seen!r} where the input has {wanted!r}")
    if init.heads is None:
        raise InputError(name, line, f"sentence {number} has no heads ('_'): an initial graph needs them")
    return list(init.heads), list(init.deprels or ["_"] * len(init.words))
