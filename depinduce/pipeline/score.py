"""The score step: the backend's scores for the sentences with visible words, through its input view, checked
to be numbers before any decoder reads them."""

from __future__ import annotations

import torch

from depinduce.errors import ModelError
from depinduce.models.base import Backend, ParseScores
from depinduce.pipeline.batch import Batch
from depinduce.structures.sentence import Sentence


def score(batch: Batch, backend: Backend, source: str, *, reads_heads: bool = True) -> None:
    """Fill ``batch.scores``; ``reads_heads``: False when the decoder does not read ``heads`` (they are then
    neither checked nor, for a backend that computes them on first read, computed)."""
    nonempty = batch.nonempty
    if not nonempty:
        return
    init = None if batch.init is None else [batch.init[k] for k in nonempty]
    results = backend.input_view.score(backend, [batch.sentences[k] for k in nonempty],
                                       [batch.hidden[k] for k in nonempty], init)
    batch.scores = dict(zip(nonempty, results))
    for k in nonempty:
        check_finite(batch.scores[k], batch.sentences[k], k, backend, source, heads=reads_heads)


def check_finite(scores: ParseScores, sentence: Sentence, k: int, backend: Backend, source: str, *,
                 heads: bool = True) -> None:
    """A sentence's scores must be numbers: NaN (or +infinity) reaching a decoder would be a traceback, or worse a
    tree of whatever shape the decoder falls back to (right-branching brackets, left-branching heads).
    ``heads``: False when the decoder does not read them (they are then neither checked nor computed)."""
    for name in ("heads", "distances", "heights")[0 if heads else 1:]:
        tensor = getattr(scores, name)
        if tensor is None:
            continue
        values = torch.as_tensor(tensor)
        if values.is_floating_point() and (values.isnan().any() or values.isposinf().any()):
            where = source if sentence.line is None else f"{source}:{sentence.line}"  # never a made-up line
            raise ModelError(f"{where}: sentence {sentence.sent_id or k + 1}: model "
                             f"'{backend.name}' gave non-finite {name} scores (NaN or infinity), so it cannot be "
                             "parsed; the model's weights or this sentence's length may overflow its numbers")
