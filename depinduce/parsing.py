"""The parse pipeline: input → hide punctuation → backend scores → shared decoders → full-token trees.

Unsupervised backends only ever see the visible (non-punctuation) words; a backend that reads whole sentences
(``capabilities.whole_sentences``: RNGTr, trained on every token with its UPOS) gets the full sentences, and
optionally an initial graph each to refine.  Everything after their scores is done here, once, so every backend
gets every decoder and output format:

- dependencies: the chosen decoder over the head scores (``argmax`` takes the highest word as the root when the
  backend gives word heights, StructFormer's own decoder), then punctuation re-attached by
  :func:`depinduce.structures.dependency.attach_hidden` (final punctuation → the root word, any other → the
  nearest word before it, or after it at the start of the sentence); labels, when the backend scores them, are
  each word's best label under its decoded head (otherwise ``root``/``dep``);
- constituency: the top-down tree from split distances when the backend has them, else the subtree spans of the
  dependency tree; visible spans are mapped back onto the full token sequence, so a punctuation token becomes a
  leaf of the lowest constituent that covers both of its neighbours.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

import conllu.models
import torch
from tqdm import tqdm

from depinduce.data.punct import sentence_punct_mask
from depinduce.data.sentence import Sentence
from depinduce.data.tokenize import tokenize_line
from depinduce.errors import DepinduceError, InputError
from depinduce.io.initial_graphs import InitialGraph
from depinduce.models.base import Backend, ParseScores
from depinduce.structures.decode import decode_batch
from depinduce.structures.dependency import attach_hidden, subtree_spans
from depinduce.structures.spans import binary_tree_from_distances, labelled_spans, spans_to_tree

OUTPUT_FORMATS = ("conllu", "conllx", "brackets", "jsonl")
DEPENDENCY_FORMATS = ("conllu", "conllx")


def _open_binary(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as exc:
        raise DepinduceError(f"{path}: cannot read ({exc.strerror})") from exc


def read_text(path: str, *, pretokenized: bool = False) -> list[Sentence]:
    """One sentence per line; blank lines are skipped and ``sent_id`` is the input line number.

    Each sentence carries a conllu TokenList as ``source`` with ``SpaceAfter=No`` where the text had no space, so
    the CoNLL-U writer reproduces ``# text`` exactly.
    """
    label = "<stdin>" if path == "-" else path
    stream = _open_binary(path)
    sentences: list[Sentence] = []
    try:
        for lineno, raw in enumerate(stream, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(label, lineno, f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})")
            line = line.rstrip("\r\n").strip()
            if not line:
                continue
            try:
                tokens = tokenize_line(line, pretokenized=pretokenized)
            except ValueError as exc:
                raise InputError(label, lineno, str(exc)) from exc
            sent_id = str(lineno)
            source = conllu.models.TokenList(
                [
                    conllu.models.Token(
                        id=i,
                        form=form,
                        lemma="_",
                        upos="X",
                        xpos=None,
                        feats=None,
                        head=None,
                        deprel=None,
                        deps=None,
                        misc=None if space else {"SpaceAfter": "No"},
                    )
                    for i, (form, space) in enumerate(zip(tokens.forms, tokens.space_after), start=1)
                ],
                metadata={"sent_id": sent_id, "text": line},
            )
            sentences.append(
                Sentence(words=tokens.forms, sent_id=sent_id, text=line, line=lineno, source=source)
            )
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    if not sentences:
        raise InputError(label, None, "no sentences (the input is empty or blank)")
    return sentences


@dataclass(frozen=True)
class ParseRequest:
    """What the user asked ``parse`` for."""

    fmt: str = "conllu"
    decoder: str = "mst"
    batch_size: int = 32


def check_request(backend: Backend, request: ParseRequest) -> None:
    """Refuse impossible combinations before any work is done."""
    caps = backend.capabilities
    if request.fmt not in OUTPUT_FORMATS:
        raise DepinduceError(f"unknown output format '{request.fmt}'; choose one of {', '.join(OUTPUT_FORMATS)}")
    if request.fmt in DEPENDENCY_FORMATS and not caps.dependency:
        raise DepinduceError(
            f"model '{backend.name}' induces constituency only and cannot write {request.fmt}; "
            "use --format brackets (or jsonl)"
        )
    if not (caps.dependency or caps.constituency):
        raise DepinduceError(f"model '{backend.name}' produces neither dependencies nor constituency")


def check_refines(backend: Backend) -> None:
    """Initial graphs (``--init``) are for refining backends only."""
    if not backend.capabilities.refines:
        raise DepinduceError(f"model '{backend.name}' does not refine a graph; --init applies to refining "
                             "backends (rngtr)")


def _full_tree(sentence: Sentence, hidden: Sequence[bool], visible: list[str], scores: ParseScores):
    """The constituency tree over every token, from distances if present, else from the dependency tree."""
    if scores.distances is not None:
        visible_tree = binary_tree_from_distances(visible, scores.distances.tolist())
        positions = [i for i, h in enumerate(hidden) if not h]
        # the visible sentence's own span becomes the whole-token root, which spans_to_tree always adds
        spans = [
            (positions[a], positions[b - 1] + 1)
            for _, a, b in labelled_spans(visible_tree)
            if (a, b) != (0, len(visible))
        ]
        return spans_to_tree(sentence.words, spans)
    if sentence.heads is None:
        raise DepinduceError(f"model produced neither distances nor heads for sentence {sentence.sent_id}")
    return spans_to_tree(sentence.words, subtree_spans(sentence.heads))


def _labels(scores: ParseScores, heads: Sequence[int]) -> list[str]:
    """Each word's best label under the head the decoder chose for it."""
    assert scores.labels is not None and scores.label_names is not None
    rows = torch.arange(1, len(heads) + 1)
    best = scores.labels[rows, torch.as_tensor(heads, dtype=torch.long)].argmax(dim=-1).tolist()
    return [scores.label_names[k] for k in best]


def _apply(sentences: list[Sentence], backend: Backend, request: ParseRequest,
           init: Sequence[InitialGraph | None] | None = None) -> None:
    """Fill heads/deprels/tree of one batch in place."""
    whole = backend.capabilities.whole_sentences
    if whole:  # the backend reads every token (and its tags) itself: nothing is hidden from it
        hidden = [[False] * len(s) for s in sentences]
    else:
        hidden = [sentence_punct_mask(s) for s in sentences]
    visible = [[w for w, h in zip(s.words, mask) if not h] for s, mask in zip(sentences, hidden)]
    nonempty = [k for k, words in enumerate(visible) if words]
    scores: dict[int, ParseScores] = {}
    if nonempty:
        if whole:
            results = backend.parse_sentences([sentences[k] for k in nonempty],
                                              None if init is None else [init[k] for k in nonempty])
        else:
            results = backend.parse_scores([visible[k] for k in nonempty])
        scores = dict(zip(nonempty, results))
    want_heads = request.fmt != "brackets" or not backend.capabilities.constituency
    want_tree = request.fmt in ("brackets", "jsonl")
    if want_heads and backend.capabilities.dependency:
        with_heads = [k for k in nonempty if scores[k].heads is not None]
        # argmax with word heights (StructFormer): the highest word is the root, as in the paper
        roots = [
            int(scores[k].heights.argmax()) + 1 if scores[k].heights is not None else None for k in with_heads
        ]
        decoded = decode_batch([scores[k].heads for k in with_heads], request.decoder, roots)
        visible_heads = dict(zip(with_heads, decoded))
        for k, sentence in enumerate(sentences):
            if k in visible_heads or not visible[k]:  # an all-punctuation sentence needs no model
                sentence.heads = attach_hidden(visible_heads.get(k, []), hidden[k])
                if k in visible_heads and scores[k].labels is not None:
                    sentence.deprels = _labels(scores[k], visible_heads[k])
                else:
                    sentence.deprels = ["root" if h == 0 else "dep" for h in sentence.heads]
    if want_tree:
        for k, sentence in enumerate(sentences):
            if not visible[k]:
                sentence.tree = spans_to_tree(sentence.words, [])
            else:
                sentence.tree = _full_tree(sentence, hidden[k], visible[k], scores[k])


def parse(
    sentences: Sequence[Sentence], backend: Backend, request: ParseRequest, *, progress: bool = True,
    init: Sequence[InitialGraph | None] | None = None,
) -> Iterator[Sentence]:
    """Parse sentences in batches, yielding each as soon as its batch is done (output streams).

    ``init``: one initial graph per sentence for a refining backend (``parse --init FILE``)."""
    check_request(backend, request)
    if init is not None:
        check_refines(backend)
        if len(init) != len(sentences):
            raise DepinduceError(f"{len(init)} initial graphs for {len(sentences)} sentences")
    bar = tqdm(total=len(sentences), unit="sent", file=sys.stderr, disable=None if progress else True, leave=False)
    try:
        for start in range(0, len(sentences), request.batch_size):
            batch = list(sentences[start : start + request.batch_size])
            _apply(batch, backend, request,
                   None if init is None else list(init[start : start + request.batch_size]))
            bar.update(len(batch))
            yield from batch
    finally:
        bar.close()
