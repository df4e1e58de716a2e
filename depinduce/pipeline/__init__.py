"""The parse pipeline, one named step per module: read → hide punctuation → score → decode → restore → write.

- read (:mod:`.read`): text lines or CoNLL-U as sentences, checked against the backend's input view;
- hide punctuation (:mod:`.batch`): the tokens the backend's input view hides — punctuation by the rule ``eval``
  removes it by (:func:`depinduce.data.punct.sentence_punct_mask`), nothing for a backend that reads whole
  sentences (RNGTr) — and the ``--max-words`` limit for backends that score every pair of words;
- score (:mod:`.score`): the input view calls the backend (``parse_scores`` on the visible words, or
  ``parse_sentences`` on tagged or whole sentences with initial graphs); scores must be finite;
- decode (:mod:`.decode`): the chosen decoder over the scores (the backend's own or its form of a shared one);
- restore (:mod:`.restore`): heads over every token (punctuation re-attached), labels, head probabilities, and
  the constituency tree mapped back onto every token;
- write: the io writers (:func:`depinduce.io.write_sentences`); pictures are drawn a layer above
  (:mod:`depinduce.pictures`), and :func:`depinduce.api.results.write` takes every format.

Everything after the backend's scores is done here, once, so every backend gets every decoder and output format.
:func:`parse` runs the middle steps batch by batch; the Python API (:mod:`depinduce.api.parser`) and the dev
evaluation of training call it.
"""

from __future__ import annotations

from depinduce.io.parse_defaults import DEFAULT_MAX_WORDS, OUTPUT_FORMATS, PROBS_FORMATS
from depinduce.models.views import visible_sentence
from depinduce.pipeline.batch import Batch, check_lengths, hide_punctuation
from depinduce.pipeline.decode import TREE_DEFAULT, Decoder, decode, decoder_for, decoders_for, parse_default
from depinduce.pipeline.read import (
    check_input,
    check_text_input,
    describe_blank_lines,
    needs_conllu_message,
    read_input,
    read_text,
    text_sentence,
)
from depinduce.pipeline.request import (
    DEPENDENCY_FORMATS,
    PICTURE_FORMATS,
    ParseRequest,
    check_probs,
    check_refines,
    check_request,
)
from depinduce.pipeline.restore import full_head_probs, mark_punctuation, restore_heads, restore_trees
from depinduce.pipeline.run import parse, parse_batch
from depinduce.pipeline.score import check_finite, score

__all__ = [
    "DEFAULT_MAX_WORDS", "DEPENDENCY_FORMATS", "OUTPUT_FORMATS", "PICTURE_FORMATS", "PROBS_FORMATS", "TREE_DEFAULT",
    "Batch", "Decoder", "ParseRequest", "check_finite", "check_input", "check_lengths", "check_probs",
    "check_refines", "check_request", "check_text_input", "decode", "decoder_for", "decoders_for",
    "describe_blank_lines", "full_head_probs", "hide_punctuation", "mark_punctuation", "needs_conllu_message",
    "parse", "parse_batch", "parse_default", "read_input", "read_text", "restore_heads", "restore_trees", "score",
    "text_sentence", "visible_sentence",
]
