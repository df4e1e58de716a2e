"""The gradient loop every neural backend but EM's trains with (:class:`GradientLoop`).

One epoch = the batches of the data regime's epoch order (:mod:`.training_data`); one optimiser step = one batch
per rank (:class:`~.step.OptimiserStep`).  After every epoch (and every ``eval_every`` steps) it measures dev
loss/perplexity and, when dev has gold trees, the parsing metrics through ``parse`` + ``evaluate``; the run
(:class:`~.trainrun.TrainingRun`) keeps the best model by ``select`` and counts patience.  ``last.pt`` is written
after every epoch, every ``checkpoint_every`` steps and when training stops.  What a resume and the budgets
guarantee is said in :mod:`depinduce.training.engine`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import torch

from depinduce.data.ud import training_view_note
from depinduce.errors import ModelError, RecipeError, ResourceError
from depinduce.training import batching, distributed
from depinduce.training.budget_bar import BudgetBar
from depinduce.training.budgets import RESERVE_SHARE, fmt_tokens
from depinduce.training.checkpoint import capture_rng, cpu_state_dict, restore_rng, state_digest
from depinduce.training.compiled_step import build_step, check_compile, compiled, prefetch_on
from depinduce.training.dev_metrics import DevMetrics, dev_treebank, perplexity
from depinduce.training.model_setup import build_model, optimiser, training_data_for, vocabularies
from depinduce.training.objectives import LossModule, Objective, objective_for
from depinduce.training.optim import Schedule
from depinduce.training.options import TrainOptions, TrainResult
from depinduce.training.precision import set_float32_products
from depinduce.training.prefetch import BatchFeed
from depinduce.training.records import TrainLog
from depinduce.training.step import OptimiserStep, PendingSums
from depinduce.training.trainrun import Log, Progress, TrainingRun, derived_seed


@dataclass
class Pace:
    """This invocation's training speed without its first step, which pays for warm-up (memory allocation, kernel
    selection, caches: 10 times a warm step on a busy machine) and so says little about the steps after it."""

    steps: int = 0
    tokens: float = 0.0  # the steps after the first
    seconds: float = 0.0
    first_tokens: float = 0.0
    first_seconds: float = 0.0

    def add(self, tokens: float, seconds: float) -> None:
        if self.steps == 0:
            self.first_tokens, self.first_seconds = tokens, seconds
        else:
            self.tokens, self.seconds = self.tokens + tokens, self.seconds + seconds
        self.steps += 1

    def tokens_per_second(self) -> float | None:
        """The warm steps' speed; until there is one, the first step's (slow, so an estimate errs long)."""
        tokens, seconds = (self.tokens, self.seconds) if self.steps > 1 else (self.first_tokens, self.first_seconds)
        return tokens / seconds if tokens and seconds > 0 else None


class GradientLoop:
    """One training invocation of a neural backend: setup (fresh or resumed), the epochs and their steps."""

    def __init__(self, options: TrainOptions, context: distributed.DistContext, log: Log) -> None:
        self.run = run = TrainingRun(options, context, log, data_file="train.txt", made_by="`depinduce preprocess`")
        self.context, self.log, cfg = context, log, run.train_config
        self.vocab, self.tags, gold = vocabularies(run)
        self.objective: Objective = objective_for(run.model_class.capabilities.objective,
                                                  mask_rate=cfg.masked_lm.mask_rate, vocab_size=len(self.vocab),
                                                  lm_mode=cfg.next_word.lm_mode, bptt=cfg.next_word.bptt,
                                                  loss_chunks=cfg.masked_lm.loss_chunks)
        self.data = training_data_for(run, self.objective, self.vocab, gold,
                                      lambda forms: self.model.word_inputs(forms))
        self.steps_per_epoch = batching.steps_per_epoch(self.data.n_batches, context.world_size)
        if self.steps_per_epoch < 1:
            raise RecipeError(f"{self.data.n_batches} batch(es) per epoch for {context.world_size} ranks; "
                              "lower batch_tokens or use fewer ranks")
        treebank = dev_treebank(run, self.data, self.objective)
        self.model = build_model(run, self.objective, self.vocab, self.tags)
        # dropout and masks differ per rank (each rank sees different batches); init is identical everywhere
        torch.manual_seed(derived_seed(cfg.execution.seed, "dropout", context.rank))
        self.mask_generator = torch.Generator().manual_seed(derived_seed(cfg.execution.seed, "mask", context.rank))
        self.loss_module = LossModule(self.model, self.objective)
        self.dev = DevMetrics(run, self.data, treebank, self.loss_module, self.mask_generator)
        # one update per batch, or several (RNGTr's ``updates: per_pass``): the schedule counts updates
        stepwise = self.objective.stepwise(self.model)
        execution = cfg.execution
        check_compile(execution.compile, run.config.model)
        # the step's module (this loss, or its static-shape twin), compiled as train.compile asks (compiled_step.py)
        self.step_module = build_step(self.model, self.objective, self.loss_module, cfg,
                                      pad_index=self.vocab.pad_index, stepwise=stepwise, device=context.device)
        wrapped = compiled(distributed.wrap(self.step_module.module, context,
                                            find_unused_parameters=execution.find_unused_parameters),
                           execution.compile, context.device, log, static=self.step_module.static)
        set_float32_products(execution.precision, context.device)
        # batches prepared ahead on a thread, with the run's mask generator (prefetch.py)
        self.feed = BatchFeed(self._prepare, self.mask_generator, context.device,
                              enabled=prefetch_on(execution.prefetch, context.device, self.objective))
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = optimiser(run, self.model, self.params)
        if stepwise and context.distributed:
            raise RecipeError("one optimiser update per refinement pass (updates: per_pass) runs in one process "
                              "only: ranks would stop refining after different passes; use updates: per_batch")
        self.schedule = Schedule(self.optimizer, cfg,
                                 cfg.budget.epochs * self.steps_per_epoch * self.objective.max_updates(self.model),
                                 token_budget=run.token_budget)
        self.step = OptimiserStep(self.model, wrapped, self.objective, self.optimizer, self.schedule, self.params,
                                  clip=cfg.optimiser.clip, precision=execution.precision, context=context,
                                  stepwise=stepwise)
        self.sums = PendingSums()  # the steps' losses, read every log_every steps and at evaluations (step.py)
        self.epoch_sums = [0.0, 0.0]  # training NLL and predicted tokens of the epoch (the progress bar's loss)
        self.window = [0.0, 0.0]  # the same since the last log_every line
        self.progress = Progress()
        self.order: list[list[int]] | None = None  # the current epoch's batch order once chosen
        self.last_eval_seconds: float | None = None
        self.last_checkpoint_seconds: float | None = None
        self.pace = Pace()
        self.estimated = False  # the time the token budget should take said (:meth:`_say_estimate`)
        self.last_record: dict[str, Any] = {}
        run.lay_out(vocab_json=self.vocab.to_json() if gold is not None else None,
                    tags_json=self.tags.to_json() if self.tags is not None else None)
        if options.resume:
            self._resume()
        run.continue_clock(self.progress)

    def _resume(self) -> None:
        run, ctx = self.run, self.context
        state, self.progress = run.read_checkpoint(self.model)
        try:
            self.optimizer.load_state_dict(state["optimizer"])
            self.schedule.load_state_dict(state["schedule"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"{run.dir.last}: optimiser state does not fit ({exc})") from exc
        position = state["position"]
        if position.get("order") is not None:
            self.order = batching.order_from_tensors(position["order"], position["offsets"])
        self.data.restore_carried(state.get("objective") or [])
        rng = state["rng"]
        if len(rng) == ctx.world_size:
            restore_rng(rng[ctx.rank], self.mask_generator)
        else:
            self.log(f"note: the checkpoint was written by {len(rng)} rank(s), this run has "
                     f"{ctx.world_size}; random streams are reseeded")
            seed = run.train_config.execution.seed
            torch.manual_seed(derived_seed(seed, f"dropout@{self.progress.step}", ctx.rank))
            self.mask_generator.manual_seed(derived_seed(seed, f"mask@{self.progress.step}", ctx.rank))
        if ctx.is_main:
            run.dir.trim_metrics(self.progress.step)
        self.log(f"resuming {run.dir.path} at epoch {self.progress.epoch + 1}, step {self.progress.step}")

    # -------------------------------------------------------------------------------------------- loop

    def train(self) -> TrainResult:
        run, ctx, cfg = self.run, self.context, self.run.train_config
        run.start(self.progress, self.dev.treebank)
        if run.options.resume and self.progress.stopped_early:
            reason = "early_stop"
        else:
            n_params = sum(p.numel() for p in self.params)
            self.log(f"training {run.config.model} ({n_params:,} parameters) on {ctx.device}"
                     f"{f' x {ctx.world_size} ranks' if ctx.distributed else ''}: {len(self.data.train_rows):,} "
                     f"sentences, {self.steps_per_epoch} steps per epoch, up to {cfg.budget.epochs} epochs")
            if note := training_view_note(run.data_dir):  # --train-on dev,test: scores are transductive
                self.log(note)
            with run.stop.installed():
                reason = self._loop()
        epochs = self.progress.epoch
        done = f"after {self.progress.step} steps ({epochs} complete epoch{'' if epochs == 1 else 's'})"
        return run.finish(reason, self.progress, self.model, self.last_record, done=done)

    def _loop(self) -> str:
        """The epochs under one progress bar for the whole run (:class:`BudgetBar`)."""
        run, progress = self.run, self.progress
        self.bar = BudgetBar(started=run.started, budget_minutes=run.budget, token_budget=run.token_budget,
                             total_steps=run.train_config.budget.epochs * self.steps_per_epoch, step=progress.step,
                             tokens_seen=progress.tokens_seen, epochs=run.train_config.budget.epochs,
                             disable=run.options.quiet or not self.context.is_main)
        try:
            return self._epochs()
        finally:
            self.feed.pause()
            self.bar.close()

    def _epochs(self) -> str:
        ctx, progress = self.context, self.progress
        if self.run.tokens_spent(progress):  # a resumed run whose token budget is already spent
            return "max_tokens"
        while progress.epoch < self.run.train_config.budget.epochs:
            if self.order is None:
                self.order = self.data.epoch_order(progress.epoch)
            n_steps = batching.steps_per_epoch(len(self.order), ctx.world_size)
            reason = self._epoch(math.ceil(progress.batches_done / ctx.world_size), n_steps)
            if progress.batches_done >= n_steps * ctx.world_size:  # the epoch is complete
                progress.epoch += 1
                progress.batches_done = 0
                self.order = None
                stop_early = self._evaluate()
                self._checkpoint()
                if stop_early:
                    return "early_stop"
                if reason is not None:
                    return reason
                continue
            # stopped inside the epoch
            if reason in ("max_time", "max_tokens") and progress.seconds > 0:
                self._evaluate()  # the budget reserved time for it, so the last steps are not wasted
            self._checkpoint()
            return reason or "signal"
        return "completed"

    def _epoch(self, first: int, n_steps: int) -> str | None:
        """Steps ``first``..``n_steps``-1 of the current epoch; returns why it stopped early, if it did
        (``early_stop`` after an ``eval_every`` evaluation, ``signal``, ``max_time``)."""
        cfg, ctx, progress = self.run.train_config, self.context, self.progress
        assert self.order is not None
        bar = self.bar
        self._settle()
        self.epoch_sums, self.window = [0.0, 0.0], [0.0, 0.0]
        epoch_tokens, epoch_seconds, window_seconds = 0, 0.0, 0.0
        self.feed.start([batching.rank_batch(self.order, k, ctx.rank, ctx.world_size) for k in range(first, n_steps)])
        for k in range(first, n_steps):
            rows = batching.rank_batch(self.order, k, ctx.rank, ctx.world_size)
            t0 = time.monotonic()
            inputs, tokens = self.feed.take(rows)  # prepared ahead when prefetching (prefetch.py)
            try:
                numbers = self.step(inputs)
            except Exception:
                self._settle(check="here")  # a loss gone infinite before is the cause to report
                raise
            self.sums.add(progress.step + 1, numbers)
            elapsed = time.monotonic() - t0
            progress.step += 1
            progress.batches_done = (k + 1) * ctx.world_size
            progress.tokens += tokens
            progress.tokens_seen += tokens * ctx.world_size  # ranks read equal shares, to a batch
            self.schedule.after_tokens(progress.tokens_seen)
            progress.seconds += elapsed
            progress.train_seconds += elapsed
            self.pace.add(tokens, elapsed)
            epoch_tokens, epoch_seconds, window_seconds = epoch_tokens + tokens, epoch_seconds + elapsed, \
                window_seconds + elapsed
            if cfg.records.log_every and progress.step % cfg.records.log_every == 0:
                self._settle()
                self._log_training(*self.window, window_seconds)
                self.window, window_seconds = [0.0, 0.0], 0.0
            bar.advance(step=progress.step, tokens_seen=progress.tokens_seen, epoch=progress.epoch + 1)
            if (k % 10 == 0 or k + 1 == n_steps) and bar.shown:
                self._settle(check="later")  # only this rank shows a bar; the ranks check together later
                epoch_nll, epoch_count = self.epoch_sums
                speed = epoch_tokens * ctx.world_size / max(epoch_seconds, 1e-9)  # training steps only
                bar.set_postfix(loss=f"{epoch_nll / max(epoch_count, 1):.3f}", tok_s=f"{speed:,.0f}",
                                lr=f"{self.schedule.lr:.2e}", seen=fmt_tokens(progress.tokens_seen))
            if cfg.records.curve_every_tokens and not self.run.tokens_spent(progress) and (
                    progress.tokens_seen // cfg.records.curve_every_tokens
                    > (progress.tokens_seen - tokens * ctx.world_size) // cfg.records.curve_every_tokens):
                self.feed.pause()  # dev may draw from the mask generator: it must be where the step is
                self.dev.curve_point(progress, self._epoch_position(), self.schedule.lr)
            if k + 1 == n_steps:
                return self._stop_reason()  # the epoch's end does its own evaluation and checkpoint
            if cfg.selection.eval_every and progress.step % cfg.selection.eval_every == 0 and self._evaluate():
                return "early_stop"
            reason = self._stop_reason()
            if reason is not None:
                return reason
            if cfg.records.checkpoint_every and progress.step % cfg.records.checkpoint_every == 0:
                self._checkpoint()
        return None

    def _prepare(self, rows: list[int]) -> tuple[dict[str, torch.Tensor], int]:
        """A training batch's CPU inputs (its masks drawn) and real tokens, padded to a static shape when set."""
        inputs, tokens = self.data.inputs(rows, self.mask_generator)
        return (inputs if self.step_module.pad is None else self.step_module.pad(inputs)), tokens

    def _settle(self, *, check: str = "together") -> None:
        """Add the steps' numbers not read yet to the run's, the epoch's and the log window's sums, in step
        order; raise if a loss diverged: every rank at once (``together``), this rank alone (``here``: its step
        failed), or at the next check every rank makes (``later``; at once in one process)."""
        progress = self.progress
        for numbers in self.sums.read():
            progress.nll_sum += numbers.nll
            progress.predicted += numbers.count
            self.epoch_sums = [self.epoch_sums[0] + numbers.nll, self.epoch_sums[1] + numbers.count]
            self.window = [self.window[0] + numbers.nll, self.window[1] + numbers.count]
        if check != "later" or not self.context.distributed:
            self.sums.check(self.context, progress.step, together=check == "together")

    def _log_training(self, nll: float, count: float, seconds: float) -> None:
        """The ``train.log_every`` record: the training loss over the last steps (this rank's batches), in
        metrics.jsonl (``"train_log": true``) and train.log — what the authors' scripts print every 100
        batches."""
        if not self.context.is_main or not count:
            return
        progress = self.progress
        record = {"step": progress.step, "epoch": self._epoch_position(), "train_log": True,
                  "lr": self.schedule.lr, "train_loss": nll / count, "tokens_seen": int(progress.tokens_seen),
                  "train_s": round(progress.train_seconds, 3), "wall_s": round(self.run.wall_seconds(), 3)}
        self.run.dir.append_metrics(record)
        line = (f"step {progress.step} | train loss {nll / count:.4f} | lr {self.schedule.lr:.2e} | "
                f"{fmt_tokens(progress.tokens_seen)} tokens seen | {seconds:.1f} s in these steps")
        if isinstance(self.log, TrainLog) and self.bar.in_place:
            self.log.file_only(line)  # a terminal has it in the progress bar
        else:
            self.log(line)

    def _epoch_position(self) -> float:
        """Epochs completed plus the share of the current epoch's batches done (a curriculum's early epochs are
        shorter than a full one)."""
        size = len(self.order) if self.order is not None else self.data.n_batches
        return round(self.progress.epoch + self.progress.batches_done / max(size, 1), 4)

    # -------------------------------------------------------------------------------------- budgets, stops

    def _stop_reason(self) -> str | None:
        """A stop every rank agrees on (:meth:`TrainingRun.stop_reason`), the final evaluation's time kept back."""
        return self.run.stop_reason(self.progress, self._kept_back, self._note_late_end)

    def _reserve(self) -> float:
        """Seconds the final evaluation and checkpoint take: the last evaluation's measured time once there was
        one; before, an estimate from this invocation's warm steps (:class:`Pace`), not from the first step."""
        if self.last_eval_seconds is not None:
            evaluation = self.last_eval_seconds
        elif self.data.dev_rows is None or (speed := self.pace.tokens_per_second()) is None:
            evaluation = 0.0
        else:
            # dev forward passes run at about the training speed; parsing the dev set costs as much again
            evaluation = 2.0 * sum(len(r) for r in self.data.dev_rows) / speed / self.context.world_size
        checkpoint = self.last_checkpoint_seconds if self.last_checkpoint_seconds is not None else 0.5
        return 1.2 * (evaluation + checkpoint) + 0.25

    def _kept_back(self) -> float:
        return self.run.kept_back(self._reserve())

    def _note_late_end(self) -> None:
        """Say so when the final evaluation will run past the budget (its reserve was capped)."""
        reserve, kept = self._reserve(), self._kept_back()
        if reserve - kept > 1.0 and self.context.is_main:
            self.log(f"note: the final evaluation is expected to take about {reserve:.0f} s, more than the "
                     f"{kept:.0f} s ({RESERVE_SHARE:.0%} of the {self.run.budget:g}-minute budget) kept back for "
                     f"it; the run ends about {reserve - kept:.0f} s after the budget")

    # ---------------------------------------------------------------------------- evaluation, checkpoints

    def _evaluate(self) -> bool:
        """Dev metrics → metrics.jsonl, model.pt when best, schedule; True when early stopping triggers."""
        run, ctx, progress = self.run, self.context, self.progress
        t0 = time.monotonic()
        self.feed.pause()  # dev may draw from the mask generator: it must be where the step is
        self._settle()
        nll, predicted, tokens, seconds = ctx.sum([progress.nll_sum, progress.predicted, progress.tokens,
                                                   progress.seconds])
        seconds /= ctx.world_size
        record: dict[str, Any] = {
            "step": progress.step,
            "epoch": self._epoch_position(),
            "lr": self.schedule.lr,
            "train_loss": nll / predicted if predicted else None,
            "train_tokens": int(tokens),
            "tokens_seen": int(progress.tokens_seen),
            "tokens_per_s": tokens / seconds if seconds else None,
        }
        if self.objective.reports_perplexity and predicted:
            record["train_ppl"] = perplexity(nll / predicted)
        record.update(self.dev.measure())
        improved = run.judge(progress, record.get(run.select), self.model)
        self.schedule.after_eval(record.get("dev_loss", record.get("train_loss")))
        stop_early = run.patience_spent(progress)
        progress.stopped_early = stop_early
        progress.nll_sum = progress.predicted = progress.tokens = progress.seconds = 0.0
        self.last_eval_seconds = time.monotonic() - t0
        progress.wall_seconds = run.wall_seconds()
        self.last_record = run.record_evaluation(record, progress, improved, self.last_eval_seconds)
        self._say_estimate()
        return stop_early

    def _say_estimate(self) -> None:
        """Once per invocation, after the first evaluation: how long the rest of the token budget should take on
        this machine at the pace measured so far (training steps and an evaluation each measured, not assumed);
        the progress bar then keeps the figure current."""
        run, progress = self.run, self.progress
        speed = self.pace.tokens_per_second()
        if self.estimated or run.token_budget is None or speed is None or self.pace.steps < 2 \
                or not self.context.is_main:
            return
        self.estimated = True
        left = max(run.token_budget - progress.tokens_seen, 0.0)
        step_tokens = self.pace.tokens / max(self.pace.steps - 1, 1) * self.context.world_size
        epoch_tokens = max(sum(len(row) for row in self.data.train_rows), 1)
        every = run.train_config.selection.eval_every
        # the epochs' and every-N-steps' evaluations still to come, and the one at the budget's end
        evaluations = left / epoch_tokens + (left / step_tokens / every if every else 0.0) + 1.0
        seconds = left / (speed * self.context.world_size) + evaluations * (self.last_eval_seconds or 0.0)
        span = f"{seconds:.0f} seconds" if seconds < 90 else f"{seconds / 60:.0f} minutes"
        self.log(f"estimate: about {span} more for the "
                 f"{fmt_tokens(run.token_budget)}-token budget on this machine ({speed * self.context.world_size:,.0f} "
                 f"tokens/s in training steps, {self.last_eval_seconds or 0:.0f} s per dev evaluation, about "
                 f"{evaluations:.0f} more); the progress bar keeps it current")

    def _checkpoint(self) -> None:
        """Write last.pt (rank 0), with every rank's random state; ranks holding different weights is an error."""
        ctx = self.context
        started = time.monotonic()
        self.feed.pause()  # the mask generator back where the step is (batches prepared ahead are drawn again)
        self._settle()
        rng = ctx.gather(capture_rng(self.mask_generator))
        carried = self.data.carried_state()
        streams = ctx.gather(carried) if carried is not None else None
        state_dict = cpu_state_dict(self.model)
        replicas = ctx.gather(state_digest(state_dict)) if ctx.distributed else []
        if len(set(replicas)) > 1:
            raise ResourceError(f"the {ctx.world_size} ranks hold different parameters at step "
                                f"{self.progress.step}; distributed training went out of sync")
        if not ctx.is_main:
            return
        order, offsets = batching.order_to_tensors(self.order) if self.order is not None else (None, None)
        self.run.write_checkpoint(
            self.progress, state_dict, optimizer=self.optimizer.state_dict(), schedule=self.schedule.state_dict(),
            rng=rng, position={"epoch": self.progress.epoch, "batches_done": self.progress.batches_done,
                               "order": order, "offsets": offsets},
            replicas=replicas, objective=streams)
        self.last_checkpoint_seconds = time.monotonic() - started
