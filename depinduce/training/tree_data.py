"""Gold trees of ``train.conllu`` (supervised and refining backends, RNGTr/SynTr): every token with its UPOS,
head and label (:mod:`.gold_data`), length-bucketed as sentences are, with a refining backend's initial graphs
(``train.init_train``/``init_dev``) beside the rows they belong to."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from depinduce.errors import NotFoundError
from depinduce.io.initial_graphs import InitialGraph, read_initial_parse
from depinduce.training import distributed
from depinduce.training.config import TrainConfig
from depinduce.training.corpus_loss import sentence_loss
from depinduce.training.gold_data import GoldData, GoldRow, collate_gold, read_initial_graphs
from depinduce.training.objectives import LossModule, Objective
from depinduce.training.training_data import LengthBatches

WordInputs = Callable[[list[list[str]]], dict[str, torch.Tensor]]


class TreeData:
    """The :class:`~.training_data.TrainingData` of gold trees.  ``word_inputs``: the model's hook turning word
    forms into tensors (a BERT encoder's word pieces), called per batch."""

    def __init__(self, gold: GoldData, data_dir: Path, objective: Objective, cfg: TrainConfig,
                 context: distributed.DistContext, log: Callable[[str], None], word_inputs: WordInputs) -> None:
        self.gold, self.objective, self.context, self.word_inputs = gold, objective, context, word_inputs
        self.pad_index = gold.vocab.pad_index
        self.train_rows = [row.words for row in gold.train]
        self.init_train: list[tuple[list[int], list[int]]] | None = None
        self.parse_init: list[InitialGraph] | None = None  # what the dev parse refines
        self.init_dev_ids: list[tuple[list[int], list[int]]] | None = None
        if cfg.start.init_train:
            self.init_train = read_initial_graphs(cfg.start.init_train, gold.train_sentences, gold.tags)
        if cfg.start.init_dev:
            if gold.dev_sentences is None:
                raise NotFoundError(f"init_dev given but {data_dir} has no dev.conllu")
            self.parse_init = read_initial_parse(cfg.start.init_dev, gold.dev_sentences)  # parsed as given
            self.init_dev_ids = [(heads, gold.tags.encode_labels(labels))  # dev loss: label ids
                                 for heads, labels in self.parse_init]
        self.batches = LengthBatches([len(r) for r in self.train_rows], cfg, is_main=context.is_main, log=log)
        self.n_batches = self.batches.n_batches
        self.dev_rows = None if gold.dev is None else [row.words for row in gold.dev]

    def epoch_order(self, epoch: int) -> list[list[int]]:
        return self.batches.epoch_order(epoch)

    def _inputs(self, rows: list[GoldRow], initial: Any, indices: Sequence[int],
                generator: torch.Generator) -> dict[str, torch.Tensor]:
        """Prepared supervised inputs for the gold rows ``indices`` (with their initial graphs when given)."""
        batch = collate_gold([rows[i] for i in indices], self.pad_index,
                             None if initial is None else [initial[i] for i in indices], self.word_inputs)
        tokens, mask = batch.pop("tokens"), batch.pop("mask")
        return self.objective.prepare(tokens, mask, generator=generator, **batch)

    def inputs(self, rows: Sequence[int], generator: torch.Generator) -> tuple[dict[str, torch.Tensor], int]:
        inputs = self._inputs(self.gold.train, self.init_train, rows, generator)
        return inputs, int(inputs["mask"].sum())

    def dev_loss(self, loss_module: LossModule, device: torch.device,
                 generator: torch.Generator) -> tuple[float, float]:
        assert self.gold.dev is not None and self.dev_rows is not None
        dev, initial = self.gold.dev, self.init_dev_ids
        batches = self.batches.dev_batches(self.dev_rows, self.context.rank, self.context.world_size)
        return sentence_loss(loss_module, batches, lambda indices: self._inputs(dev, initial, indices, generator),
                             device=device)

    def carried_state(self) -> Any:
        return None

    def restore_carried(self, states: list[Any]) -> None:
        pass
