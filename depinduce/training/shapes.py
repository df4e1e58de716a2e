"""Static shapes: a batch padded to one of a few (rows, length) shapes, with a loss that padding cannot change.

Why: a compiled step (``train.compile``) is specialised to its tensors' shapes, and a captured CUDA graph
(``reduce-overhead``) to their sizes too; the engine's length-bucketed batches come in hundreds of shapes (every
row count × every longest sentence), which would recompile the step again and again.  Here the rows and the
length are each rounded up on a ladder of sizes about 1.5× apart (1, 2, 3, 4, 6, 8, 12, 16, 24, …), so an epoch
of PTB-like batches takes a few dozen shapes at most and the padding costs at most that factor per dimension.

The padding leaves every loss and gradient as the exact batch gives them (``tests/test_static_shapes.py``):
added columns are padding, which the backends mask already; added rows are all padding, and nothing predicts
them.  A backend with batch statistics (PRPN's BatchNorm, which counts each sentence's start) keeps its exact
row count, since an added row would change them; only its length is rounded up.  The losses read
only the predicted positions, gathered by index (masked LM: ``positions``, padded to a ladder size too and
ignored through ``targets`` = -100), so the loss's shape never depends on how many words were masked; the
index is made on the CPU, so the step reads nothing back from a GPU.  ``loss_chunks`` runs are padded each on its
own.

Without a compiler the padding buys nothing and costs compute (the ladder pads an epoch of Brown's length-bucketed
4,096-token batches to 1.39× their tokens), so an eager step on a GPU takes the same loss on the exact batch,
with an index of exactly its predicted positions (``to_ladder=False``): still no read by the host.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from depinduce.errors import RecipeError
from depinduce.models.layers.output_loss import IGNORE, widened
from depinduce.models.neural import LinearOutputLayer

# The static-shape inputs of one masked-LM batch (or of one loss_chunks run, as KEY_i)
_MLM_KEYS = ("tokens", "mask", "masked", "positions", "targets")


def ladder(n: int) -> int:
    """The smallest size ≥ ``n`` among 1, 2, 3, 4, 6, 8, 12, 16, 24, … (2^k and 1.5 · 2^k)."""
    if n <= 2:
        return max(n, 1)
    power = 1 << (n - 1).bit_length()  # smallest power of two ≥ n
    return 3 * power // 4 if 3 * power // 4 >= n else power


def static_shape(rows: int, length: int) -> tuple[int, int]:
    """The (rows, length) a batch of ``rows`` sentences of at most ``length`` words is padded to."""
    return ladder(rows), ladder(length)


def _pad_rows(tokens: torch.Tensor, mask: torch.Tensor, pad_index: int,
              pad_rows: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``tokens``/``mask`` (B, T) padded to the static shape (the rows too when ``pad_rows``)."""
    rows, length = static_shape(*tokens.shape)
    rows = rows if pad_rows else tokens.shape[0]
    out_tokens = torch.full((rows, length), pad_index, dtype=tokens.dtype)
    out_mask = torch.zeros((rows, length), dtype=torch.bool)
    out_tokens[: tokens.shape[0], : tokens.shape[1]] = tokens
    out_mask[: mask.shape[0], : mask.shape[1]] = mask
    return out_tokens, out_mask


def has_batch_statistics(model: torch.nn.Module) -> bool:
    """Whether a training forward pass normalises over the batch (BatchNorm): then added rows would count."""
    return any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules())


def pad_inputs(objective: str, inputs: dict[str, torch.Tensor], pad_index: int, *,
               pad_rows: bool = True, chunks: int | None = None, to_ladder: bool = True) -> dict[str, torch.Tensor]:
    """The inputs of :class:`StaticLoss` for one prepared (CPU) batch of ``objective``: padded to the static shape,
    or with ``to_ladder=False`` (an eager step on a GPU) the exact batch, with an index of exactly its predicted
    positions — either way made on the CPU, so the step reads nothing back.  With ``chunks`` (masked LM's
    ``train.loss_chunks``) the batch is split as the objective splits it and each run is trimmed to its own
    longest sentence (read here, on the CPU) and padded on its own: keys ``tokens_0``, ...."""
    if objective == "mlm" and chunks is not None:
        runs = zip(*(inputs[key].tensor_split(min(chunks, len(inputs["tokens"])))
                     for key in ("tokens", "mask", "masked")))
        padded: dict[str, torch.Tensor] = {}
        for index, run in enumerate(runs):
            width = int(run[1].sum(dim=1).max())
            trimmed = dict(zip(("tokens", "mask", "masked"), (t[:, :width] for t in run)))
            padded.update({f"{key}_{index}": value for key, value in
                           pad_inputs("mlm", trimmed, pad_index, pad_rows=pad_rows, to_ladder=to_ladder).items()})
        return padded
    if to_ladder:
        tokens, mask = _pad_rows(inputs["tokens"], inputs["mask"], pad_index, pad_rows)
    else:
        tokens, mask = inputs["tokens"], inputs["mask"]
    rows, width = inputs["tokens"].shape
    if objective == "mlm":
        masked = torch.zeros_like(mask)
        masked[:rows, :width] = inputs["masked"]
        flat = masked.flatten().nonzero().squeeze(1)  # hidden[masked]'s order: row-major
        size = ladder(max(len(flat), 1)) if to_ladder else max(len(flat), 1)
        positions = torch.zeros(size, dtype=torch.long)
        positions[: len(flat)] = flat
        targets = torch.full((size,), IGNORE, dtype=torch.long)
        targets[: len(flat)] = tokens.flatten()[flat]
        return dict(zip(_MLM_KEYS, (tokens, mask, masked, positions, targets)))
    if objective == "lm":
        # predicted: every word of a real row and its closing boundary (NextWordLM), nothing of an added row
        lengths = inputs["mask"].sum(dim=1)
        targets = torch.full((tokens.shape[0], tokens.shape[1] + 1), IGNORE, dtype=torch.long)
        targets[:rows, :width] = inputs["tokens"].masked_fill(~inputs["mask"], IGNORE)
        return {"tokens": tokens, "mask": mask, "targets": targets, "lengths": lengths}
    raise RecipeError(f"static shapes apply to masked-LM and next-word LM training; this model's objective is "
                      f"'{objective}' (set train.compile: off)")


def _summed_nll(model: Any, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Summed cross-entropy of the non-ignored ``targets`` under the backend's output layer: the same numbers as
    the objectives' (a linear output layer as one ``F.linear``, which a compiler can fuse)."""
    if isinstance(model, LinearOutputLayer):
        logits = F.linear(*model.output_layer(hidden))
    else:
        logits = model.output_logits(hidden)
    return F.cross_entropy(widened(logits), targets, ignore_index=IGNORE, reduction="sum")


class StaticLoss(torch.nn.Module):
    """The objective's loss on static-shape inputs (:func:`pad_inputs`): (loss, summed NLL, predicted tokens),
    as :class:`~depinduce.training.objectives.LossModule` gives them for the exact batch."""

    def __init__(self, model: torch.nn.Module, objective: str, *, mask_index: int, boundary_index: int) -> None:
        super().__init__()
        self.model = model
        self.objective = objective
        self.mask_index = mask_index
        self.boundary_index = boundary_index

    def forward(self, **inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.objective == "mlm" and "tokens_0" in inputs:  # loss_chunks: the sum of the runs' mean losses
            parts = []
            while f"tokens_{len(parts)}" in inputs:
                run = len(parts)
                parts.append(self._loss({key: inputs[f"{key}_{run}"] for key in _MLM_KEYS}))
            return (sum(p[0] for p in parts), sum(p[1] for p in parts), sum(p[2] for p in parts))  # type: ignore
        return self._loss(inputs)

    def _loss(self, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        model = self.model
        if self.objective == "mlm":
            tokens, mask, masked = inputs["tokens"], inputs["mask"], inputs["masked"]
            hidden = model.encode(tokens.masked_fill(masked, self.mask_index), mask)
            picked = hidden.flatten(0, 1).index_select(0, inputs["positions"])
            targets = inputs["targets"]
        else:
            hidden = model.lm_hidden(inputs["tokens"], inputs["mask"])
            targets = inputs["targets"]
            # the closing boundary after each real row's last word (NextWordLM): a scatter, no host sync
            rows = torch.arange(inputs["lengths"].shape[0], device=targets.device)
            targets = targets.index_put((rows, inputs["lengths"]), torch.full_like(rows, self.boundary_index))
            picked = hidden.flatten(0, 1)
            targets = targets.flatten()
        nll = _summed_nll(model, picked, targets)
        count = (targets != IGNORE).sum()
        loss = nll / count.clamp(min=1)
        reg = model.regularizer()
        if reg is not None:
            loss = loss + reg
        return loss, nll.detach(), count
