"""The gradient loop's dev measurements: dev loss (perplexity) through the data regime and, where dev has gold
trees, the parsing metrics through the parse pipeline (:func:`~.evaluation.parsing_metrics`); which metric
selects the model; and the learning-curve points (``curve_every_tokens``)."""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from depinduce.training.budgets import fmt_tokens
from depinduce.training.evaluation import DevTreebank, check_selectable, parsing_metrics
from depinduce.training.objectives import LossModule, Objective
from depinduce.training.training_data import TrainingData
from depinduce.training.trainrun import Progress, TrainingRun, fmt_value


def perplexity(loss: float) -> float:
    return math.exp(loss) if loss < 700 else float("inf")


def dev_treebank(run: TrainingRun, data: TrainingData, objective: Objective) -> DevTreebank:
    """The gold dev annotation the run scores against, with ``run.select`` settled: what the data can score
    (without dev.txt the training loss selects; without perplexity the dev loss does)."""
    cfg = run.train_config
    treebank = DevTreebank.load(run.data_dir) if cfg.selection.dev_parse else DevTreebank()
    available = treebank.available(run.model_class)
    run.check_decoder()
    if data.dev_rows is None and cfg.selection.select == "dev_ppl":
        run.select = "train_loss"
        run.log("note: the data folder has no dev.txt; the best model is chosen by training loss")
    else:
        check_selectable(cfg.selection.select, available, has_dev_text=data.dev_rows is not None)
        run.select = cfg.selection.select
    if run.select == "dev_ppl" and not objective.reports_perplexity:
        run.select = "dev_loss"
    return treebank


class DevMetrics:
    """Dev measured for one model, every rank getting the same numbers."""

    def __init__(self, run: TrainingRun, data: TrainingData, treebank: DevTreebank, loss_module: LossModule,
                 generator: torch.Generator) -> None:
        self.run, self.data, self.treebank = run, data, treebank
        self.loss_module, self.generator = loss_module, generator

    def measure(self) -> dict[str, Any]:
        """Dev loss (perplexity) and, where dev has gold trees, the parsing metrics."""
        run, ctx = self.run, self.run.context
        record: dict[str, Any] = {}
        if self.data.dev_rows is not None:
            nll_sum, count = self.data.dev_loss(self.loss_module, ctx.device, self.generator)
            nll_sum, count = ctx.sum([nll_sum, count])
            dev_loss = nll_sum / count if count else float("nan")
            record["dev_loss"] = dev_loss
            if self.loss_module.objective.reports_perplexity:
                record["dev_ppl"] = perplexity(dev_loss)
        parse_metrics: dict[str, float | None] = {}
        if ctx.is_main and self.treebank.available(run.model_class):
            model = self.loss_module.model
            model.eval()
            try:
                parse_metrics = parsing_metrics(model, self.treebank, decoder=run.train_config.selection.decoder,
                                                init=self.data.parse_init, progress=not run.options.quiet)
            finally:
                model.train()
        record.update(ctx.broadcast(parse_metrics))
        return record

    def curve_point(self, progress: Progress, epoch: float, lr: float) -> None:
        """A learning-curve record: dev measured and logged, nothing else touched — the schedule, model
        selection, patience and the training statistics since the last evaluation stay as they were, so the run
        trains exactly as it would without these records."""
        t0 = time.monotonic()
        record: dict[str, Any] = {"step": progress.step, "epoch": epoch, "curve": True, "lr": lr,
                                  "tokens_seen": int(progress.tokens_seen)}
        record.update(self.measure())
        record["eval_s"] = round(time.monotonic() - t0, 3)
        record["wall_s"] = round(self.run.wall_seconds(), 3)
        if self.run.context.is_main:
            self.run.dir.append_metrics(record)
            shown = [f"{key[4:]} {fmt_value(record[key])}" for key in ("dev_ppl", "dev_dda", "dev_uda", "dev_uf1")
                     if record.get(key) is not None]
            self.run.log(f"curve point at {fmt_tokens(progress.tokens_seen)} training tokens: {', '.join(shown)}")
