"""Sentences of ``train.txt``, each on its own (masked LM, next-word LM with ``lm_mode: sentences``, likelihood
models): length-bucketed batches, and dev through the same corpus loss as ``depinduce perplexity`` (a masked LM
with masks fixed per dev sentence, so dev loss does not depend on batching)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from depinduce.data.vocab import Vocab
from depinduce.io.filenames import DEV_TXT, TRAIN_TXT
from depinduce.training import batching, distributed
from depinduce.training.config import TrainConfig
from depinduce.training.corpus_loss import sentence_loss, text_inputs
from depinduce.training.objectives import LossModule, Objective, fixed_masks
from depinduce.training.training_data import LengthBatches


class SentenceData:
    """The :class:`~.training_data.TrainingData` of plain sentences."""

    parse_init = None

    def __init__(self, data_dir: Path, vocab: Vocab, objective: Objective, cfg: TrainConfig,
                 context: distributed.DistContext, log: Callable[[str], None]) -> None:
        self.vocab, self.objective, self.context = vocab, objective, context
        self.train_rows = batching.read_corpus(data_dir / TRAIN_TXT, vocab)
        self.batches = LengthBatches([len(r) for r in self.train_rows], cfg, is_main=context.is_main, log=log)
        self.n_batches = self.batches.n_batches
        dev_path = data_dir / DEV_TXT
        self.dev_rows = batching.read_corpus(dev_path, vocab) if dev_path.is_file() else None
        self.dev_masks = None
        if self.dev_rows is not None and objective.name == "mlm":
            self.dev_masks = fixed_masks(self.dev_rows, cfg.masked_lm.mask_rate, cfg.selection.dev_mask_seed)

    def epoch_order(self, epoch: int) -> list[list[int]]:
        return self.batches.epoch_order(epoch)

    def inputs(self, rows: Sequence[int], generator: torch.Generator) -> tuple[dict[str, torch.Tensor], int]:
        batch = batching.collate(self.train_rows, rows, self.vocab.pad_index)
        return self.objective.prepare(batch.tokens, batch.mask, generator=generator), batch.n_tokens

    def dev_loss(self, loss_module: LossModule, device: torch.device,
                 generator: torch.Generator) -> tuple[float, float]:
        assert self.dev_rows is not None
        batches = self.batches.dev_batches(self.dev_rows, self.context.rank, self.context.world_size)
        inputs_for = text_inputs(self.objective, self.dev_rows, self.vocab.pad_index, self.dev_masks)
        return sentence_loss(loss_module, batches, inputs_for, device=device)

    def carried_state(self) -> Any:
        return None

    def restore_carried(self, states: list[Any]) -> None:
        pass
