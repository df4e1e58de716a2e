"""The restore step: decoded heads and scored trees over the visible words -> trees over every token.

- dependencies: punctuation re-attached by :func:`depinduce.structures.dependency.attach_hidden` (final
  punctuation → the root word, any other → the nearest word before it, or after it at the start of the
  sentence); labels, when the backend scores them, are each word's best label under its decoded head (otherwise
  ``root``/``dep``); hidden tokens are marked as punctuation (:func:`mark_punctuation`); CoNLL-U input loses its
  enhanced graph (DEPS, empty nodes), gold annotation that the prediction does not have;
- constituency: the top-down tree from split distances when the backend has them, else the subtree spans of the
  dependency tree; visible spans are mapped back onto the full token sequence, so a punctuation token becomes a
  leaf of the lowest constituent that covers both of its neighbours.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import conllu.models
import torch

from depinduce.errors import ModelError
from depinduce.io.conllu_format import without_enhanced_graph
from depinduce.models.base import Backend, ParseScores
from depinduce.pipeline.batch import Batch
from depinduce.pipeline.decode import Decoder
from depinduce.structures.dependency import attach_hidden, subtree_spans
from depinduce.structures.sentence import Sentence
from depinduce.structures.spans import (
    binary_tree_from_distances,
    labelled_spans,
    nary_tree_from_distances,
    spans_to_tree,
)


def restore_heads(batch: Batch, backend: Backend, *, probs: bool = False, decoder: Decoder | None = None) -> None:
    """Heads, labels (and with ``probs`` head distributions: the one ``decoder`` read) over every token of each
    sentence that has decoded heads or no visible word."""
    visible = batch.visible
    for k, sentence in enumerate(batch.sentences):
        if k not in batch.heads and visible[k]:
            continue  # scored, but without head scores to decode
        heads = batch.heads.get(k)
        sentence.heads = attach_hidden([] if heads is None else heads, batch.hidden[k])
        if heads is not None and batch.scores[k].labels is not None:
            sentence.deprels = labels(batch.scores[k], heads)
        else:
            sentence.deprels = ["root" if h == 0 else "dep" for h in sentence.heads]
        if isinstance(sentence.source, conllu.models.TokenList):
            sentence.source = without_enhanced_graph(sentence.source)
        if probs:
            sentence.head_probs = ([None] * len(sentence) if heads is None else
                                   full_head_probs(backend, batch.scores[k], heads, batch.hidden[k],
                                                   None if decoder is None else decoder.probs))
        mark_punctuation(sentence, batch.hidden[k])


def restore_trees(batch: Batch) -> None:
    """The constituency tree over every token of each sentence."""
    visible = batch.visible
    for k, sentence in enumerate(batch.sentences):
        if not visible[k]:
            sentence.tree = spans_to_tree(sentence.words, [])
        else:
            sentence.tree = full_tree(sentence, batch.hidden[k], visible[k], batch.scores[k])


def labels(scores: ParseScores, heads: Sequence[int]) -> list[str]:
    """Each word's best label under the head the decoder chose for it."""
    assert scores.labels is not None and scores.label_names is not None
    rows = torch.arange(1, len(heads) + 1)
    best = scores.labels[rows, torch.as_tensor(heads, dtype=torch.long)].argmax(dim=-1).tolist()
    return [scores.label_names[k] for k in best]


def full_head_probs(backend: Backend, scores: ParseScores, visible_heads: Sequence[int],
                    hidden: Sequence[bool],
                    distribution: Callable[[ParseScores], torch.Tensor] | None = None) -> list[list[float] | None]:
    """Each token's head distribution over ROOT and every token, from the one the decoder read over ROOT and the
    visible words — ``distribution`` (a decoder's own, :attr:`~depinduce.models.base.OwnDecoder.probs`), else
    the backend's (:meth:`~depinduce.models.base.Backend.word_head_probs`), or probability 1 for the decoded head
    where the backend computes none; a hidden token (punctuation, attached by rule) gets None."""
    m = len(visible_heads)
    if backend.head_probs == "decoded":
        visible = torch.zeros((m, m + 1), dtype=torch.float64)
        visible[torch.arange(m), torch.as_tensor(list(visible_heads), dtype=torch.long)] = 1.0
    else:
        read = distribution if distribution is not None else backend.word_head_probs
        visible = read(scores).double().cpu()
    positions = [0] + [i + 1 for i, h in enumerate(hidden) if not h]  # visible index -> token index (0 = ROOT)
    full = torch.zeros((m, len(hidden) + 1), dtype=torch.float64)
    full[:, positions] = visible
    rows = iter(full.tolist())
    return [None if h else next(rows) for h in hidden]


def mark_punctuation(sentence: Sentence, hidden: Sequence[bool]) -> None:
    """Tokens hidden from the model as punctuation get DEPREL ``punct`` (unless they are the root) and, where
    the input gave no part of speech, UPOS ``PUNCT`` — so MaltEval (``--ExcludeDeprels punct``) and UD tools
    can leave out exactly what depinduce left out."""
    if not any(hidden):
        return
    n = len(sentence.words)
    upos = list(sentence.upos) if sentence.upos is not None else ["_"] * n
    source_words = []
    if isinstance(sentence.source, conllu.models.TokenList):
        source_words = [t for t in sentence.source if isinstance(t.get("id"), int)]
        if len(source_words) != n:
            source_words = []
    for i, is_hidden in enumerate(hidden):
        if not is_hidden:
            continue
        if upos[i] in ("", "_", "X"):
            upos[i] = "PUNCT"
        if source_words and source_words[i].get("upos") in (None, "", "_", "X"):
            source_words[i]["upos"] = "PUNCT"
        if sentence.deprels is not None and sentence.heads is not None and sentence.heads[i] != 0:
            sentence.deprels[i] = "punct"
    sentence.upos = upos


def full_tree(sentence: Sentence, hidden: Sequence[bool], visible: list[str], scores: ParseScores):
    """The constituency tree over every token, from distances if present (tied maxima as ``split_ties`` says),
    else from the dependency tree."""
    if scores.distances is not None:
        from_distances = nary_tree_from_distances if scores.split_ties else binary_tree_from_distances
        visible_tree = from_distances(visible, scores.distances.tolist())
        positions = [i for i, h in enumerate(hidden) if not h]
        # the visible sentence's own span becomes the whole-token root, which spans_to_tree always adds
        spans = [
            (positions[a], positions[b - 1] + 1)
            for _, a, b in labelled_spans(visible_tree)
            if (a, b) != (0, len(visible))
        ]
        return spans_to_tree(sentence.words, spans)
    if sentence.heads is None:
        raise ModelError(f"model produced neither distances nor heads for sentence {sentence.sent_id}")
    return spans_to_tree(sentence.words, subtree_spans(sentence.heads))
