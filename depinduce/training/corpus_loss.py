"""The objective's loss summed over a whole corpus: dev evaluation during training and ``depinduce perplexity``
after it use this one code path, so a run's dev perplexity and a later measurement on the same file agree.

Sentence objectives go through length-sorted batches (masked LM with masks fixed per sentence, so the number
does not depend on batching); continuous text goes chunk by chunk through a :class:`~.batching.TokenStream`
with its own carried state, which starts from zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from depinduce.training import batching
from depinduce.training.objectives import LossModule, Objective, StreamLM


def sentence_loss(loss_module: LossModule, batches: Sequence[Sequence[int]],
                  inputs_for: Callable[[Sequence[int]], dict[str, torch.Tensor]], *, device: torch.device,
                  progress=None) -> tuple[float, float]:
    """(summed NLL, predicted tokens) over ``batches`` of sentence indices; ``inputs_for`` turns one batch into
    the objective's prepared inputs (plain rows with fixed MLM masks, or gold rows for supervised parsing)."""
    nll_sum, count = 0.0, 0.0
    was_training = loss_module.training
    loss_module.eval()
    try:
        with torch.inference_mode():
            for batch_rows in batches:
                inputs = inputs_for(batch_rows)
                _, nll, n = loss_module(**{k: v.to(device) for k, v in inputs.items()})
                nll_sum += float(nll)
                count += float(n)
                if progress is not None:
                    progress(len(batch_rows))
    finally:
        loss_module.train(was_training)
    return nll_sum, count


def text_inputs(objective: Objective, rows: Sequence[Sequence[int]], pad_index: int,
                masks: Sequence[torch.Tensor] | None) -> Callable[[Sequence[int]], dict[str, torch.Tensor]]:
    """:func:`sentence_loss` inputs for model-view text (``masks``: the fixed MLM masks per sentence)."""

    def inputs_for(batch_rows: Sequence[int]) -> dict[str, torch.Tensor]:
        batch = batching.collate(rows, batch_rows, pad_index)
        fixed = [masks[i] for i in batch_rows] if masks is not None else None
        return objective.prepare(batch.tokens, batch.mask, generator=None, fixed=fixed)

    return inputs_for


def stream_loss(loss_module: LossModule, stream: batching.TokenStream, *, device: torch.device, name: str = "eval",
                progress=None) -> tuple[float, float]:
    """(summed NLL, predicted tokens) over continuous text, reading it chunk by chunk from a zero state under
    the objective's state ``name`` (a training stream's state is left as it was)."""
    objective = loss_module.objective
    assert isinstance(objective, StreamLM)
    previous = objective.active
    objective.use(name)
    objective.reset(name)
    nll_sum, count = 0.0, 0.0
    was_training = loss_module.training
    loss_module.eval()
    try:
        with torch.inference_mode():
            for k in range(stream.n_chunks):
                inputs = stream.chunk(k)
                _, nll, n = loss_module(**{key: v.to(device) for key, v in inputs.items()})
                nll_sum += float(nll)
                count += float(n)
                if progress is not None:
                    progress(1)
    finally:
        objective.reset(name)
        objective.use(previous)
        loss_module.train(was_training)
    return nll_sum, count
