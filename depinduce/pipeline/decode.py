"""The decode step: a backend's scores -> each sentence's heads over its visible words, by the chosen decoder.

A decoder is looked up by name for one backend (:func:`decoder_for`): the backend's own (the authors',
``Backend.own_decoders``), its own form of a shared one (``Backend.shared_decoder_forms``: StructFormer's
``argmax`` roots the highest word), else the shared decoder over ``ParseScores.heads``.  A backend that decides
its tree without scores (``ParseScores.fixed_heads``, the fixed baselines) keeps that tree whatever the decoder.

``parse``'s default decoder (:func:`parse_default`) is the run's own (``Backend.default_decoder``) when it gives a
tree; when it does not (an argmax: StructFormer's paper recipe records ``structformer-argmax``, which gives a
well-formed tree for 8.6% of PTB sentences), ``parse`` writes :data:`TREE_DEFAULT` trees over the same scores,
so that its default output can be piped into MaltEval, and says once how to ask for the run's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from depinduce.models.base import Backend, OwnDecoder, ParseScores
from depinduce.pipeline.batch import Batch
from depinduce.structures.decode import DECODERS, decode_batch

# The shared decoders that always give a single-rooted tree (``argmax`` does not: cycles, several roots).
TREE_DECODERS = ("mst", "eisner")
# What ``parse`` decodes with by default when the run's own decoder does not always give a tree: the maximum
# spanning tree is the best single-rooted tree under the same head scores and, like an argmax, is not limited to
# projective trees, so wherever the argmax already is a single-rooted tree the two agree (Eisner would change the
# non-projective ones as well).
TREE_DEFAULT = "mst"


@dataclass(frozen=True)
class Decoder:
    """One decoder as it applies to one backend's scores."""

    name: str
    decode: Callable[[Sequence[ParseScores]], list[list[int]]]  # a batch's scores -> each sentence's n heads
    # False: it reads other fields than ``ParseScores.heads``, which are then neither checked nor computed
    reads_heads: bool = True
    gives_trees: bool = True
    # The head distribution it reads when not the backend's (``OwnDecoder.probs``): what ``--probs`` prints
    probs: Callable[[ParseScores], torch.Tensor] | None = None


def decoders_for(backend: Backend) -> tuple[str, ...]:
    """The decoders ``parse --decoder`` accepts for this backend: the shared ones, then its own (the authors')."""
    return (*DECODERS, *backend.own_decoders)


def decoder_for(backend: Backend, name: str) -> Decoder:
    """Decoder ``name`` for ``backend`` (one of :func:`decoders_for`, checked by ``check_request``)."""
    form: OwnDecoder | None = backend.own_decoders.get(name) or backend.shared_decoder_forms.get(name)
    if form is not None:
        decode = form.decode
        return Decoder(name, lambda batch: [decode(scores) for scores in batch], form.reads_heads, form.gives_trees,
                       form.probs)
    # the shared decoders as one batch: Eisner runs padded batches of similar lengths
    return Decoder(name, lambda batch: decode_batch([scores.heads for scores in batch], name),
                   gives_trees=name in TREE_DECODERS)


def parse_default(backend: Backend) -> tuple[str, str | None]:
    """The decoder ``parse`` uses when none is named, and the line it says about it (None: nothing to say).

    The run's own decoder, unless it does not always give a tree: then :data:`TREE_DEFAULT`, and the line says
    which decoder the run selected and reported with and how to ask for it.  A run whose decoder does not apply
    at all keeps it, so that the request check names the run's config.yaml."""
    own = backend.default_decoder
    if own not in decoders_for(backend) or decoder_for(backend, own).gives_trees:
        return own, None
    where = f" in {backend.decoder_source}" if backend.decoder_source else ""
    return TREE_DEFAULT, (f"parse: writing {TREE_DEFAULT} trees (one per sentence); the run's own decoder, {own} "
                          f"(train.decoder{where}: its dev scores, and the paper's figures for a paper recipe), does "
                          f"not always give a tree — --decoder {own} parses with it")


def decode(batch: Batch, backend: Backend, decoder: Decoder) -> None:
    """Fill ``batch.heads`` (visible heads, 1-based, 0 = ROOT) of every scored sentence that has a tree to decode:
    the backend's fixed tree, or the decoder's over its scores (a sentence without head scores gets none)."""
    scores = batch.scores
    fixed = {k: list(s.fixed_heads) for k, s in scores.items() if s.fixed_heads is not None}
    decodable = [k for k in batch.nonempty
                 if k not in fixed and (not decoder.reads_heads or scores[k].heads is not None)]
    decoded = decoder.decode([scores[k] for k in decodable])
    batch.heads = {**dict(zip(decodable, decoded)), **fixed}
