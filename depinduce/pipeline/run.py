"""The steps in order, batch by batch: hide punctuation → score → decode → restore (reading and writing are the
callers', :mod:`depinduce.pipeline.read` and the io writers)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence

from tqdm import tqdm

from depinduce.errors import UsageError
from depinduce.io.initial_graphs import InitialGraph
from depinduce.models.base import Backend
from depinduce.pipeline.batch import Batch, check_lengths, hide_punctuation
from depinduce.pipeline.decode import decode, decoder_for
from depinduce.pipeline.request import ParseRequest, check_refines, check_request
from depinduce.pipeline.restore import restore_heads, restore_trees
from depinduce.pipeline.score import score
from depinduce.structures.sentence import Sentence


def parse_batch(sentences: Sequence[Sentence], backend: Backend, request: ParseRequest,
                init: Sequence[InitialGraph | None] | None = None) -> Batch:
    """Fill heads, relations and trees of one batch's sentences in place (the request already checked)."""
    batch = hide_punctuation(sentences, backend, init)
    check_lengths(batch, backend, request.max_words, request.source)
    decoder = decoder_for(backend, request.decoder)
    score(batch, backend, request.source, reads_heads=decoder.reads_heads)
    if request.wants_heads(backend):
        decode(batch, backend, decoder)
        restore_heads(batch, backend, probs=request.probs, decoder=decoder)
    if request.wants_tree(backend):
        restore_trees(batch)
    return batch


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
            raise UsageError(f"{len(init)} initial graphs for {len(sentences)} sentences")
    bar = tqdm(total=len(sentences), unit="sent", file=sys.stderr, disable=None if progress else True, leave=False)
    try:
        for start in range(0, len(sentences), request.batch_size):
            batch = list(sentences[start : start + request.batch_size])
            parse_batch(batch, backend, request,
                        None if init is None else list(init[start : start + request.batch_size]))
            bar.update(len(batch))
            yield from batch
    finally:
        bar.close()
