"""What the gradient loop reads, whatever the objective: :class:`TrainingData`, the one interface of the three data
regimes — sentences of ``train.txt`` (:mod:`.sentence_data`: masked and next-word LMs, likelihood models), one
continuous token stream (:mod:`.stream_data`: next-word LMs with ``lm_mode: continuous``) and gold trees of
``train.conllu`` (:mod:`.tree_data`: supervised and refining backends).  The objective chooses the regime
(:func:`depinduce.training.gradient.training_data_for`); the loop never asks which one it has.

:class:`LengthBatches` is the epoch order the two sentence regimes share: shuffled length buckets, with the
``max_length`` cap and a length curriculum.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

from depinduce.errors import RecipeError
from depinduce.training import batching
from depinduce.training.config import TrainConfig
from depinduce.training.objectives import LossModule


class TrainingData(Protocol):
    """One data regime: the training rows in epoch orders, one batch's prepared inputs, and dev."""

    train_rows: list[list[int]]  # the training sentences as word indices (the log counts them)
    dev_rows: list[list[int]] | None  # dev as word indices; None: the data folder has no dev text
    n_batches: int  # batches of a full epoch, all ranks together (sizes the schedule and the log line)
    parse_init: Any  # initial graphs of the dev sentences for a refining backend's dev parse; else None

    def epoch_order(self, epoch: int) -> list[list[int]]:
        """Epoch ``epoch``'s batches (row indices), every rank's, in the order the steps take them."""

    def inputs(self, rows: Sequence[int], generator: torch.Generator) -> tuple[dict[str, torch.Tensor], int]:
        """One batch's prepared inputs (on the CPU) and the training tokens it holds."""

    def dev_loss(self, loss_module: LossModule, device: torch.device,
                 generator: torch.Generator) -> tuple[float, float]:
        """This rank's share of dev: (summed NLL, predicted tokens); ``generator``: the training masks' (a regime
        whose dev inputs draw from it keeps doing so)."""

    def carried_state(self) -> Any:
        """What a checkpoint must keep beyond the model (a stream's carried state); None when nothing."""

    def restore_carried(self, states: list[Any]) -> None:
        """Take back :meth:`carried_state` as every rank saved it."""


class LengthBatches:
    """Shuffled length buckets of ``batch_tokens`` tokens, sentences over the epoch's length cap left out."""

    def __init__(self, lengths: list[int], cfg: TrainConfig, *, is_main: bool, log: Callable[[str], None]) -> None:
        given = cfg.batches
        usable = [n for n in lengths if given.max_length is None or n <= given.max_length]
        if not usable:
            raise RecipeError(f"no training sentence has at most max_length={given.max_length} words")
        first_cap = batching.curriculum_length(given.max_length, given.curriculum_start, given.curriculum_step, 0)
        if given.curriculum_start is not None and not any(0 < n <= first_cap for n in lengths):
            raise RecipeError(f"no training sentence has at most curriculum_start={given.curriculum_start} words")
        self.lengths, self.cfg, self.is_main, self.log = lengths, cfg, is_main, log
        # a full epoch (a curriculum's early epochs are shorter): sizes the linear schedule and the log line
        self.n_batches = len(batching.epoch_order(lengths, given.batch_tokens, seed=cfg.execution.seed, epoch=0,
                                                  max_length=given.max_length))

    def epoch_order(self, epoch: int) -> list[list[int]]:
        given = self.cfg.batches
        cap = batching.curriculum_length(given.max_length, given.curriculum_start, given.curriculum_step, epoch)
        if given.curriculum_start is not None and self.is_main and cap != given.max_length:
            self.log(f"curriculum: epoch {epoch + 1} trains on sentences of at most {cap} words")
        return batching.epoch_order(self.lengths, given.batch_tokens, seed=self.cfg.execution.seed, epoch=epoch,
                                    max_length=cap)

    def dev_batches(self, dev_rows: list[list[int]], rank: int, world_size: int) -> list[Sequence[int]]:
        """This rank's share of dev, in length-sorted batches."""
        return batching.shard(batching.eval_order([len(r) for r in dev_rows], self.cfg.batches.batch_tokens),
                              rank, world_size)
