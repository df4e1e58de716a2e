"""The run every training loop shares (:class:`TrainingRun`): what makes a gradient run and an EM run the same
kind of run to the user, whatever the loop does between evaluations.

It owns the run directory (checks, lock, layout, ``manifest.json``, ``train.log`` and TensorBoard), the resolved
config and the budgets, the stop signals and the stop decision every rank agrees on, model selection and patience,
the ``last.pt`` format, the wall clock across resumes, and the end: the outcome, the end-reason table and the
summary lines.  The loops (:mod:`.gradient`, :mod:`.em`) hold one and call it; none inherits from another.
"""

from __future__ import annotations

import hashlib
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from depinduce.errors import ModelError, NotFoundError, RecipeError, RunDirectoryError, UsageError
from depinduce.io.filenames import LOG_FILE, TENSORBOARD_DIR
from depinduce.locking import exclusive
from depinduce.models.neural import NeuralBackend
from depinduce.models.registry import backend_class
from depinduce.structures.decode import DECODERS
from depinduce.training import distributed
from depinduce.training.budgets import capped_reserve
from depinduce.training.checkpoint import (
    FORMAT, VERSION, atomic_torch_save, cpu_state_dict, load_train_state, save_model,
)
from depinduce.training.config import LOWER_IS_BETTER, ResolvedConfig, load_recipe, load_run_config, resolve_config
from depinduce.training.evaluation import DevTreebank
from depinduce.training.options import TrainOptions, TrainResult
from depinduce.training.outcome import BASELINE, baseline_metrics, dev_comparison
from depinduce.training.records import TensorBoard, TrainLog
from depinduce.training.run import FreshStart, RunDir, check_run_dir, clear_run_files, command_line
from depinduce.training.signals import stop_signals_handled

Log = Callable[[str], None]

# How a run ended, as its last line says it; a loop words its own "completed" and "early_stop" (:meth:`finish`).
END_REASONS = {
    "completed": "finished",
    "early_stop": "stopped early (no improvement)",
    "max_time": "stopped at the --max-time budget",
    "max_tokens": "stopped at the --max-tokens budget",
    "signal": "stopped on request",
}
_STOP_CODES = {None: 0, "max_tokens": 1, "max_time": 2, "signal": 3}  # a stop every rank agrees on: the largest


@dataclass
class Progress:
    """Where training stands; stored in ``last.pt`` as plain numbers."""

    epoch: int = 0  # epochs completed
    batches_done: int = 0  # batches of the current epoch's order already consumed (all ranks)
    step: int = 0  # optimiser steps overall
    best: float | None = None
    best_step: int | None = None
    bad_evals: int = 0
    evaluations: int = 0
    stopped_early: bool = False
    train_seconds: float = 0.0
    wall_seconds: float = 0.0  # wall-clock time of every invocation so far (setup, evaluations included)
    # training tokens read since the run began (all ranks; never reset): what --max-tokens counts. A checkpoint
    # from before this field resumes counting from 0.
    tokens_seen: int = 0
    # training statistics since the last evaluation (summed over ranks at evaluation time)
    nll_sum: float = 0.0
    predicted: float = 0.0
    tokens: float = 0.0
    seconds: float = 0.0


def derived_seed(seed: int, purpose: str, rank: int = 0) -> int:
    """Independent seeds for independent streams (model init, dropout per rank, masks per rank)."""
    digest = hashlib.sha256(f"{seed}:{purpose}:{rank}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def trainable_class(name: str) -> type[NeuralBackend]:
    """The registered backend ``name``, which must be a trainable neural backend."""
    cls = backend_class(name)
    if not (isinstance(cls, type) and issubclass(cls, NeuralBackend)) or not cls.capabilities.trainable:
        raise ModelError(f"model '{name}' is not trainable; `depinduce models` lists which ones are")
    return cls


def fmt_value(value: float | None) -> str:
    """A selection value for the log (``n/a`` before there is one)."""
    return "n/a" if value is None else f"{value:.4g}"


def summary_line(record: dict[str, Any], select: str) -> str:
    """An evaluation's line in the log: the step, losses, dev scores, speed and the best value so far."""
    parts = [f"epoch {record['epoch']:g} step {record['step']}"]
    if record.get("train_loss") is not None:
        parts.append(f"train loss {record['train_loss']:.4f}")
    for key, label in (("dev_ppl", "dev ppl"), ("dev_loss", "dev loss"), ("dev_dda", "DDA"), ("dev_uda", "UDA"),
                       ("dev_las", "LAS"), ("dev_uf1", "UF1")):
        if record.get(key) is not None and not (key == "dev_loss" and "dev_ppl" in record):
            parts.append(f"{label} {record[key]:.2f}")
    if record.get("tokens_per_s"):
        parts.append(f"{record['tokens_per_s']:,.0f} tok/s")
    parts.append(f"best {select} {fmt_value(record['best_value'])}{' *' if record['best'] else ''}")
    return " | ".join(parts)


class StopSignal:
    """SIGTERM/SIGINT ask for a clean stop at the next step (a second SIGINT interrupts at once)."""

    def __init__(self) -> None:
        self.received: str | None = None

    @contextmanager
    def installed(self) -> Iterator[None]:
        def handler(signum: int, frame: Any) -> None:
            if self.received is not None and signum == signal.SIGINT:
                raise KeyboardInterrupt
            self.received = signal.Signals(signum).name

        with stop_signals_handled(handler):
            yield


def open_records(stack: ExitStack, options: TrainOptions, context: distributed.DistContext, log: TrainLog, *,
                 fresh: FreshStart | None = None, trained: Callable[[], bool] = lambda: True) -> None:
    """One writer per run directory (the first rank takes its lock; the others write nothing); the log file is
    closed when the stack unwinds.  ``fresh``: a new run's files are taken back, still under the lock, when the
    block fails before ``trained()`` (the first training step), so the same command can simply be run again."""
    if context.is_main:
        stack.enter_context(exclusive(options.run_dir, "train"))
    stack.callback(log.close)
    if fresh is not None:
        fresh.locked = True  # from here on, what appears in the run folder is this start's
        def take_back(kind: type[BaseException] | None, *_: Any) -> None:
            if kind is not None and not trained():
                log.close()  # train.log is among the files taken back
                fresh.take_back_files()

        stack.push(take_back)


class TrainingRun:
    """One invocation's run: set up in the order a user's mistakes are best reported (data folder, run directory,
    a resume's data and config, then the config and budgets), before any loop reads data."""

    def __init__(self, options: TrainOptions, context: distributed.DistContext, log: Log, *, data_file: str,
                 made_by: str) -> None:
        self.options = options
        self.context = context
        self.log = log
        self.started = time.monotonic()
        if options.threads is not None:
            torch.set_num_threads(options.threads)
        self.dir = RunDir(Path(options.run_dir))
        self.data_dir = Path(options.data_dir)
        if not (self.data_dir / data_file).is_file():
            raise NotFoundError(f"{self.data_dir}: no {data_file}; make the data folder with {made_by}")
        check_run_dir(self.dir.path, force=options.force, resume=options.resume, data_dir=self.data_dir)
        if options.resume:
            # before the data are read: resuming on other data is reported as that, not as what it breaks later
            self.dir.check_resume_data(self.data_dir)
            self.dir.check_resume_config()
        context.barrier()  # every rank has checked before rank 0 creates anything
        self.config = self._resolve_config()
        self.train_config = self.config.train
        recipe_budget = self.train_config.budget
        # --max-time, else the recipe's own budget (train.max_time); either is per invocation
        self.budget = options.max_time if options.max_time is not None else recipe_budget.max_time
        self.deadline = None if self.budget is None else self.started + self.budget * 60.0
        # --max-tokens, else the recipe's train.max_tokens: a budget for the whole run, the same on every machine
        self.token_budget = options.max_tokens if options.max_tokens is not None else recipe_budget.max_tokens
        self.model_class = trainable_class(self.config.model)
        self.stop = StopSignal()
        self.select = self.train_config.selection.select  # the loop settles it once it knows what its data can score
        self.wall_base = 0.0  # a resumed run's clock continues from its checkpoint (:meth:`continue_clock`)
        self.resumed_step: int | None = None  # the checkpoint's step, once a resume has read it

    def _resolve_config(self) -> ResolvedConfig:
        options = self.options
        if options.resume:
            if options.recipe is not None or options.overrides or options.seed is not None:
                raise UsageError("--resume continues with the run's own config.yaml; "
                                 "--recipe, --set and --seed cannot change it")
            config = load_run_config(self.dir.path, lambda name: trainable_class(name).config_class)
            if options.model is not None and options.model != config.model:
                raise RunDirectoryError(f"{self.dir.config} is a '{config.model}' run, not '{options.model}'")
            return config
        recipe = load_recipe(options.recipe) if options.recipe is not None else {}
        name = options.model or recipe.get("model")
        if name is None:
            raise UsageError("no model given: pass --model NAME or a recipe with a 'model' key")
        return resolve_config(model_name=options.model, model_config_class=trainable_class(name).config_class,
                              recipe=recipe, overrides=options.overrides, seed=options.seed,
                              where=str(options.recipe or "recipe"))

    # ------------------------------------------------------------------------------------------- the folder

    def open_log(self, stack: ExitStack, log: TrainLog) -> None:
        """``train.log`` in the run directory, and TensorBoard events when the config asks for them."""
        log.open(self.dir.path / LOG_FILE)
        if self.train_config.records.tensorboard and self.context.is_main:
            resumed = self.resumed_step  # a resume hides the events a killed run wrote after its checkpoint
            board = TensorBoard(self.dir.path / TENSORBOARD_DIR,
                                purge_step=None if resumed is None else resumed + 1)
            stack.callback(board.close)
            self.dir.observers.append(board)

    def check_decoder(self) -> None:
        """``train.decoder`` must be one the backend parses with."""
        decoders = (*DECODERS, *self.model_class.own_decoders)
        if self.train_config.selection.decoder not in decoders:
            raise RecipeError(f"train.decoder: '{self.train_config.selection.decoder}' does not apply to model "
                              f"'{self.config.model}'; choose one of {', '.join(decoders)}")

    def lay_out(self, *, vocab_json: str | None = None, tags_json: str | None = None) -> None:
        """Rank 0 lays out (or, resuming, keeps) the run directory; the other ranks wait for it."""
        if self.context.is_main and not self.options.resume:
            if self.options.force and self.dir.path.is_dir():
                clear_run_files(self.dir.path)
            self.dir.create(self.config.to_yaml(), self.data_dir, vocab_json=vocab_json, tags_json=tags_json)
        self.context.barrier()

    def start(self, progress: Progress, dev: DevTreebank) -> None:
        """This invocation's entry in ``manifest.json``, and right-branching's dev scores once per run."""
        ctx = self.context
        if ctx.is_main:
            self.dir.start_manifest(
                model=self.config.model, seed=self.train_config.execution.seed, data_dir=self.data_dir,
                command=self.options.command or command_line(), device=str(ctx.device),
                world_size=ctx.world_size, threads=torch.get_num_threads(),
                resumed_from_step=progress.step if self.options.resume else None, settings=self.told())
            # what ``parse``, ``models`` and ``report`` compare the selected model with
            if "baselines" not in self.dir.read_manifest() and dev.available(backend_class(BASELINE)):
                self.dir.record_baselines({BASELINE: baseline_metrics(dev)})
        ctx.barrier()

    def told(self) -> dict[str, Any]:
        """What this run was told beside its config (``manifest.json`` ``settings``), so a resume continues it."""
        seeds = self.options.seeds
        return {"max_tokens": self.options.max_tokens, "max_time": self.options.max_time,
                "seeds": list(seeds) if seeds is not None else None}

    # -------------------------------------------------------------------------------------- budgets, stops

    def tokens_spent(self, progress: Progress) -> bool:
        return self.token_budget is not None and progress.tokens_seen >= self.token_budget

    def kept_back(self, reserve: float) -> float:
        """The time kept back at the budget's end: ``reserve``, at most the budget's RESERVE_SHARE."""
        return capped_reserve(reserve, self.started, self.deadline)

    def stop_reason(self, progress: Progress, kept_back: Callable[[], float],
                    late: Callable[[], None] | None = None) -> str | None:
        """A stop every rank agrees on: a signal on any rank, the time budget about to run out (``kept_back``
        seconds before its end; ``late`` is told when that stops the run), or the token budget read."""
        local: str | None = None
        if self.stop.received is not None:
            local = "signal"
        elif self.deadline is not None and time.monotonic() + kept_back() >= self.deadline:
            local = "max_time"
            if late is not None:
                late()
        elif self.tokens_spent(progress):
            local = "max_tokens"
        if not self.context.distributed:
            return local
        agreed = int(self.context.max(_STOP_CODES[local]))
        return {code: name for name, code in _STOP_CODES.items()}[agreed]

    # ------------------------------------------------------------------------------- selection, patience

    def judge(self, progress: Progress, value: float | None, model: torch.nn.Module, *,
              missing_is_bad: bool = True) -> bool:
        """Whether ``value`` of the selection metric improves on the best; the best model goes to ``model.pt``.
        ``missing_is_bad``: an evaluation without the metric counts against patience (EM's skipped dev parses
        do not)."""
        lower_better = self.select in LOWER_IS_BETTER
        improved = value is not None and (
            progress.best is None or (value < progress.best if lower_better else value > progress.best))
        if improved:
            progress.best, progress.best_step, progress.bad_evals = value, progress.step, 0
            if self.context.is_main:
                save_model(self.dir.model, cpu_state_dict(model))
        elif value is not None or missing_is_bad:
            progress.bad_evals += 1
        progress.evaluations += 1
        return improved

    def record_evaluation(self, record: dict[str, Any], progress: Progress, improved: bool,
                          eval_seconds: float) -> dict[str, Any]:
        """An evaluation's record completed with the selection and the clocks, in ``metrics.jsonl`` and as a
        summary line (rank 0)."""
        record.update({"select": self.select, "best": improved, "best_value": progress.best,
                       "eval_s": round(eval_seconds, 3), "train_s": round(progress.train_seconds, 3),
                       "wall_s": round(progress.wall_seconds, 3)})
        if self.context.is_main:
            self.dir.append_metrics(record)
            self.log(summary_line(record, self.select))
        return record

    def patience_spent(self, progress: Progress) -> bool:
        patience = self.train_config.selection.patience
        return patience is not None and progress.bad_evals >= patience

    # -------------------------------------------------------------------------------------- checkpoints

    def write_checkpoint(self, progress: Progress, model_state: dict[str, torch.Tensor], *,
                         position: dict[str, Any], optimizer: dict[str, Any] | None = None,
                         schedule: dict[str, Any] | None = None, rng: list[Any] | None = None,
                         **extra: Any) -> None:
        """``last.pt`` (the caller is the writing rank): the format every loop writes, a loop's own parts
        (``extra``) last; EM has no optimiser, schedule or random state, so those are empty."""
        progress.wall_seconds = self.wall_seconds()
        state = {"format": FORMAT, "version": VERSION, "model": model_state, "optimizer": optimizer or {},
                 "schedule": schedule or {}, "rng": rng or [], "position": position, "progress": asdict(progress),
                 "world_size": self.context.world_size, **extra}
        atomic_torch_save(state, self.dir.last)

    def read_checkpoint(self, model: torch.nn.Module) -> tuple[dict[str, Any], Progress]:
        """``last.pt`` with its weights loaded into ``model``, and the progress it records."""
        state = load_train_state(self.dir.last)
        try:
            model.load_state_dict(state["model"])
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0]
            raise ModelError(f"{self.dir.last}: does not fit the configured model ({first})") from exc
        try:
            progress = Progress(**state["progress"])
        except TypeError as exc:
            raise ModelError(f"{self.dir.last}: unexpected progress record ({exc})") from exc
        self.resumed_step = progress.step
        return state, progress

    def continue_clock(self, progress: Progress) -> None:
        """A resumed run's wall clock goes on from its checkpoint's."""
        self.wall_base = progress.wall_seconds

    def wall_seconds(self) -> float:
        """Wall-clock seconds of the run so far (learning curves against time read it from metrics.jsonl)."""
        return self.wall_base + (time.monotonic() - self.started)

    # ---------------------------------------------------------------------------------------------- end

    def finish(self, reason: str, progress: Progress, model: torch.nn.Module, last_record: dict[str, Any], *,
               done: str, endings: dict[str, str] | None = None) -> TrainResult:
        """The result; on rank 0 the outcome in the manifest and the last line (``done``: what ran, e.g.
        ``after 12 steps (1 complete epoch)``; ``endings``: the loop's own words for an end)."""
        ctx = self.context
        if not self.dir.model.is_file() and ctx.is_main:
            # stopped before any evaluation: the current weights are the only model there is
            save_model(self.dir.model, cpu_state_dict(model))
        result = TrainResult(self.dir.path, reason, progress.step, progress.epoch, self.select, progress.best,
                             last_record)
        if ctx.is_main:
            outcome = {"reason": reason, "step": result.step, "epochs_completed": result.epoch,
                       "select": self.select, "best": result.best, "best_step": progress.best_step}
            if reason == "signal":  # by name: SIGINT is Ctrl-C
                outcome["signal"] = self.stop.received
            self.dir.finish_manifest(outcome)
            ending = {**END_REASONS, **(endings or {})}[reason]
            self.log(f"{ending} {done}; best {self.select}: {fmt_value(result.best)}; run saved in {self.dir.path}")
            if (comparison := dev_comparison(self.dir.path)) is not None:
                self.log(comparison)
        ctx.barrier()
        return result
