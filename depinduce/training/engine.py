"""The training loop every neural backend shares.

One epoch = the shuffled, length-bucketed batches of ``train.txt`` (see :mod:`.batching`); one optimiser step =
one batch per rank.  After every epoch (and every ``eval_every`` steps) the engine measures dev loss/perplexity
with fixed dev masks and, when dev has gold trees, the parsing metrics through ``parse`` + ``evaluate``; it
appends them to ``metrics.jsonl``, keeps the best model by ``select`` in ``model.pt``, steps a plateau schedule,
and stops early after ``patience`` evaluations without improvement.  ``last.pt`` is written after every epoch,
every ``checkpoint_every`` steps and when training stops (``--max-time``, SIGTERM/SIGINT).

What a resume guarantees: it continues at the exact step the checkpoint recorded, with the model, optimiser,
schedule, random states (so the same masks and dropout), batch order, best metric and early-stopping counter of
that moment.  On the same device type and thread count, a killed-and-resumed CPU run ends with bitwise the same
parameters as an uninterrupted run with the same seed (the tests check this); GPU kernels may be
nondeterministic, so there the guarantee is the position and state, not the last bit.  ``--max-time`` is a
budget per invocation (a resumed run gets a fresh one), setup included, with the final evaluation's time kept back
from it (measured, or estimated from the warm steps; at most :data:`RESERVE_SHARE` of it); ``--max-tokens`` is a
budget for the whole run (the training tokens read so far are in the checkpoint), so it ends at the same point on
every machine.
"""

from __future__ import annotations

import hashlib
import math
import signal
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

import click
import torch

from depinduce.data.files import VOCAB_MAX_BYTES, read_text_file
from depinduce.data.tags import TagVocab
from depinduce.data.ud import training_view_note
from depinduce.data.vocab import Vocab
from depinduce.errors import ModelError, NotFoundError, RecipeError, ResourceError, RunDirectoryError, UsageError
from depinduce.locking import exclusive
from depinduce.models.neural import NeuralBackend, load_state_dict
from depinduce.models.registry import backend_class
from depinduce.structures.decode import DECODERS
from depinduce.training import batching, defaults, distributed
from depinduce.training.budget_bar import BudgetBar
from depinduce.training.checkpoint import (
    FORMAT, VERSION, atomic_torch_save, capture_rng, cpu_state_dict, load_train_state, restore_rng, save_model,
    state_digest,
)
from depinduce.training.config import LOWER_IS_BETTER, ResolvedConfig, load_recipe, load_run_config, resolve_config
from depinduce.training.evaluation import DevTreebank, baseline_metrics, check_selectable, parsing_metrics
from depinduce.training.outcome import BASELINE
from depinduce.training.signals import stop_signals_handled
from depinduce.io.initial_graphs import read_initial_parse
from depinduce.training.corpus_loss import sentence_loss, stream_loss, text_inputs
from depinduce.training.gold_data import GoldData, GoldRow, collate_gold, load_gold_data, read_initial_graphs
from depinduce.training.objectives import LossModule, Objective, StreamLM, fixed_masks, objective_for
from depinduce.training.optim import Schedule, build_optimizer, clip_gradients
from depinduce.training.precision import autocast, check_precision
from depinduce.training.records import LOG_NAME, TENSORBOARD_DIR, TensorBoard, TrainLog
from depinduce.training.run import RunDir, check_run_dir, clear_run_files, command_line, recorded_settings

Log = Callable[[str], None]


def _stderr(message: str) -> None:
    click.echo(message, err=True)


@dataclass
class TrainOptions:
    """What ``depinduce train`` was asked to do (the CLI's options, as the library takes them)."""

    data_dir: Path | None = None  # None: data/ptb (see :mod:`.defaults`)
    run_dir: Path | None = None  # None: runs/NAME, runs/NAME-2, … (never an existing folder)
    model: str | None = None
    recipe: Path | None = None
    overrides: tuple[str, ...] = ()
    device: str = "auto"
    threads: int | None = None
    seed: int | None = None
    resume: bool = False
    max_time: float | None = None  # minutes
    max_tokens: int | None = None  # training tokens over the whole run (resumes included)
    quiet: bool = False
    force: bool = False
    command: list[str] | None = None
    seeds: tuple[int, ...] | None = None  # the --seeds this run is one of (recorded, so --resume finds them all)


@dataclass
class TrainResult:
    """How a training invocation ended."""

    run_dir: Path
    reason: str  # completed | early_stop | max_time | max_tokens | signal
    step: int
    epoch: int
    select: str
    best: float | None
    last_metrics: dict[str, Any] = field(default_factory=dict)


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


# The most of a time budget kept back for the final evaluation and checkpoint.  A budget is bought for training:
# when the evaluation alone costs more than this share (a 1-minute budget, a 40-second evaluation on a busy
# machine), keeping all of it back would leave a few steps — or one — so the run trains for at least the rest
# and ends late by the excess instead (the log says so).  Three quarters of any budget go to setup and training.
RESERVE_SHARE = 0.25


@dataclass
class _Pace:
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


def capped_reserve(reserve: float, started: float, deadline: float | None) -> float:
    """``reserve`` seconds, but never more than RESERVE_SHARE of the budget that runs from ``started`` to
    ``deadline`` (monotonic clock)."""
    return reserve if deadline is None else min(reserve, RESERVE_SHARE * (deadline - started))


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


class _StopSignal:
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


def train(options: TrainOptions, log: Log = _stderr) -> TrainResult:
    """Train (or resume) one run; joins the torchrun process group when launched under torchrun."""
    if options.max_time is not None and not options.max_time > 0:
        raise UsageError("--max-time must be a positive number of minutes")
    if options.max_tokens is not None and not options.max_tokens > 0:
        raise UsageError("--max-tokens must be a positive number of training tokens")
    if options.threads is not None and options.threads < 1:
        raise UsageError("--threads must be at least 1")
    context = distributed.setup(options.device)
    try:
        shown = log if (context.is_main and not options.quiet) else (lambda _: None)
        # every status line also goes to RUN_DIR/train.log (written by the first rank, --quiet or not)
        tee = TrainLog(shown, keep=context.is_main)
        options, chosen = _with_defaults(options, context)
        with ExitStack() as stack:
            if context.is_main:  # one writer per run directory; other ranks write nothing
                stack.enter_context(exclusive(options.run_dir, "train"))
            stack.callback(tee.close)
            trainer = _trainer_class(options)(options, context, tee)
            tee.open(trainer.run_dir.path / LOG_NAME)
            if trainer.train_config.tensorboard and context.is_main:
                board = TensorBoard(trainer.run_dir.path / TENSORBOARD_DIR)
                stack.callback(board.close)
                trainer.run_dir.observers.append(board)
            if chosen:  # said once the settings are known to be valid, so an error stays a single line
                tokens = "" if trainer.token_budget is None else \
                    f", token budget {_fmt_tokens(trainer.token_budget)} training tokens"
                tee(f"{chosen}, time budget {_fmt_minutes(trainer.budget)}{tokens}")
            result = trainer.run()
        # every rank done before the group goes away: a rank whose peer tears gloo down mid-exchange aborts
        context.barrier()
        return result
    finally:
        distributed.teardown(context)


def _trainer_class(options: TrainOptions) -> type["Trainer"]:
    """The engine's loop, or for objective ``em`` (the DMV) EM with the same run contract (:mod:`.em`)."""
    config = Path(options.run_dir) / "config.yaml" if options.resume and options.run_dir else None
    recipe = config if config is not None and config.is_file() else options.recipe
    name = options.model or (load_recipe(recipe).get("model") if recipe is not None else None)
    if isinstance(name, str) and trainable_class(name).capabilities.objective == "em":
        from depinduce.training.em import EMTrainer  # it subclasses Trainer: imported here, not at the top

        return EMTrainer
    return Trainer


def _with_defaults(options: TrainOptions, context: distributed.DistContext) -> tuple[TrainOptions, str | None]:
    """Fill in what the user left out (data folder, run directory, recipe); the start of the line saying what was
    chosen (the time budget is added once the config is resolved)."""
    chosen: list[str] = []
    if options.resume and options.run_dir is not None:
        options, line = _as_recorded(options)
        if line is not None:
            chosen.append(line)
    data_dir = defaults.default_data_dir(options.data_dir)
    if options.data_dir is None:
        chosen.append(f"data {data_dir}")
    recipe = options.recipe
    if recipe is not None:
        recipe = defaults.recipe_path(recipe)
    run_dir = options.run_dir
    if options.resume:
        if run_dir is None:
            raise UsageError("--resume needs --out RUN_DIR: the run to continue")
        line = f"resume {run_dir}: " + ", ".join(chosen) if chosen else None
        return replace(options, data_dir=data_dir, recipe=recipe), line
    name = options.model or (load_recipe(recipe).get("model") if recipe is not None else None)
    if name is None:
        raise UsageError("no model given: pass --model NAME or a recipe with a 'model' key")
    if recipe is None:
        recipe = defaults.default_recipe(trainable_class(name).default_recipes, context.device.type, name)
        chosen.append(f"recipe {recipe.stem if recipe else 'none (the backend defaults)'}"
                      + (f" ({recipe})" if recipe else ""))
    if run_dir is None:
        if context.distributed:
            raise UsageError("under torchrun give --out RUN_DIR: every rank must write to the same run")
        run_dir = defaults.fresh_run_dir(name)
        chosen.append(f"run directory {run_dir}")
    line = f"train {name}: " + ", ".join(chosen) if chosen else None
    return replace(options, data_dir=data_dir, run_dir=run_dir, recipe=recipe), line


def _as_recorded(options: TrainOptions) -> tuple[TrainOptions, str | None]:
    """A resume continues the run that was started: the data folder, budgets and seeds it recorded fill in what
    the command leaves out (a budget given anew replaces the recorded one, and other data are refused by their
    checksums); what was filled in, for the log."""
    recorded = recorded_settings(Path(options.run_dir)) if options.run_dir is not None else None
    if recorded is None:
        return options, None
    filled = []
    data_dir = options.data_dir
    if data_dir is None:
        if not recorded.data_dir.is_dir():
            raise NotFoundError(f"{options.run_dir}: the run's data folder {recorded.data_dir} is not there any "
                                "more; give --data DIR with the same data (its checksums are checked)")
        data_dir = recorded.data_dir
    max_tokens, max_time = options.max_tokens, options.max_time
    if max_tokens is None and recorded.max_tokens is not None:
        max_tokens = recorded.max_tokens
        filled.append(f"--max-tokens {recorded.max_tokens}")
    if max_time is None and recorded.max_time is not None:
        max_time = recorded.max_time
        filled.append(f"--max-time {recorded.max_time:g}")
    seeds = options.seeds if options.seeds is not None else \
        (tuple(recorded.seeds) if recorded.seeds is not None else None)
    line = f"the run's recorded {' and '.join(filled)}" if filled else None
    return replace(options, data_dir=data_dir, max_tokens=max_tokens, max_time=max_time, seeds=seeds), line


def _fmt_tokens(tokens: float) -> str:
    """A token count as people read budgets: 2.50M, 480k, 900."""
    if tokens >= 1e6:
        return f"{tokens / 1e6:.2f}M"
    return f"{tokens / 1e3:.0f}k" if tokens >= 1e4 else f"{tokens:.0f}"


def _fmt_minutes(minutes: float | None) -> str:
    if minutes is None:
        return "none (until the recipe's epochs end)"
    return f"{minutes:g} minute{'' if minutes == 1 else 's'}"


class Trainer:
    """One training invocation: setup (fresh or resumed), the loop, evaluation and checkpoints."""

    def __init__(self, options: TrainOptions, context: distributed.DistContext, log: Log) -> None:
        self._open_run(options, context, log, "train.txt", "`depinduce preprocess`")
        self.gold: GoldData | None = None
        self.tags: TagVocab | None = None
        if self.model_class.capabilities.objective == "supervised":
            # supervised backends index every token of train.conllu (punctuation too) and read UPOS/labels
            self.gold = load_gold_data(
                self.data_dir, vocab=Vocab.load(self.run_dir.vocab) if options.resume else None,
                tags=TagVocab.load(self.run_dir.tags) if options.resume else None)
            self.vocab, self.tags = self.gold.vocab, self.gold.tags
        else:
            self.vocab = Vocab.load(self.run_dir.vocab if options.resume else self.data_dir / "vocab.json")

        self.objective: Objective = objective_for(self.model_class.capabilities.objective,
                                                  mask_rate=self.train_config.mask_rate, vocab_size=len(self.vocab),
                                                  lm_mode=self.train_config.lm_mode, bptt=self.train_config.bptt,
                                                  loss_chunks=self.train_config.loss_chunks)
        self.streaming = isinstance(self.objective, StreamLM)
        self._load_data()
        self._build_model()
        self.progress = Progress()
        self.order: list[list[int]] | None = None  # the current epoch's batch order once chosen
        self.last_eval_seconds: float | None = None
        self.last_checkpoint_seconds: float | None = None
        self.pace = _Pace()
        self.last_record: dict[str, Any] = {}
        self.stop = _StopSignal()
        self._prepare_run_dir()
        if options.resume:
            self._resume()
        self.wall_base = self.progress.wall_seconds  # a resumed run's clock continues from its checkpoint

    # ------------------------------------------------------------------------------------------- setup

    def _open_run(self, options: TrainOptions, context: distributed.DistContext, log: Log, data_file: str,
                  made_by: str) -> None:
        """The setup every trainer shares (this loop and EM's): the data folder must hold ``data_file``, the run
        directory is checked (and a resume's data and config), then the config and the budgets are resolved."""
        self.options = options
        self.context = context
        self.log = log
        self.started = time.monotonic()
        if options.threads is not None:
            torch.set_num_threads(options.threads)
        self.run_dir = RunDir(Path(options.run_dir))
        self.data_dir = Path(options.data_dir)
        if not (self.data_dir / data_file).is_file():
            raise NotFoundError(f"{self.data_dir}: no {data_file}; make the data folder with {made_by}")
        check_run_dir(self.run_dir.path, force=options.force, resume=options.resume, data_dir=self.data_dir)
        if options.resume:
            # before the data are read: resuming on other data is reported as that, not as what it breaks later
            self.run_dir.check_resume_data(self.data_dir)
            self.run_dir.check_resume_config()
        context.barrier()  # every rank has checked before rank 0 creates anything
        self.config = self._resolve_config()
        self.train_config = self.config.train
        # --max-time, else the recipe's own budget (train.max_time); either is per invocation
        self.budget = options.max_time if options.max_time is not None else self.train_config.max_time
        self.deadline = None if self.budget is None else self.started + self.budget * 60.0
        # --max-tokens, else the recipe's train.max_tokens: a budget for the whole run, the same on every machine
        self.token_budget = options.max_tokens if options.max_tokens is not None else self.train_config.max_tokens
        self.model_class = trainable_class(self.config.model)

    def _resolve_config(self) -> ResolvedConfig:
        options = self.options
        if options.resume:
            if options.recipe is not None or options.overrides or options.seed is not None:
                raise UsageError("--resume continues with the run's own config.yaml; "
                                 "--recipe, --set and --seed cannot change it")
            config = load_run_config(self.run_dir.path, lambda name: trainable_class(name).config_class)
            if options.model is not None and options.model != config.model:
                raise RunDirectoryError(f"{self.run_dir.config} is a '{config.model}' run, not '{options.model}'")
            return config
        recipe = load_recipe(options.recipe) if options.recipe is not None else {}
        name = options.model or recipe.get("model")
        if name is None:
            raise UsageError("no model given: pass --model NAME or a recipe with a 'model' key")
        return resolve_config(model_name=options.model, model_config_class=trainable_class(name).config_class,
                              recipe=recipe, overrides=options.overrides, seed=options.seed,
                              where=str(options.recipe or "recipe"))

    def _load_data(self) -> None:
        cfg = self.train_config
        self.init_train = self.init_dev = self.init_dev_ids = None
        if (cfg.init_train or cfg.init_dev) and not self.model_class.capabilities.refines:
            raise ModelError(f"model '{self.config.model}' does not refine a graph; init_train/init_dev "
                             "(--init-train/--init-dev) apply to refining backends (rngtr)")
        if self.gold is not None:
            self.train_rows = [row.words for row in self.gold.train]
            if cfg.init_train:
                self.init_train = read_initial_graphs(cfg.init_train, self.gold.train_sentences, self.gold.tags)
            if cfg.init_dev:
                if self.gold.dev_sentences is None:
                    raise NotFoundError(f"init_dev given but {self.data_dir} has no dev.conllu")
                self.init_dev = read_initial_parse(cfg.init_dev, self.gold.dev_sentences)  # parsed as given
                self.init_dev_ids = [(heads, self.gold.tags.encode_labels(labels))  # dev loss: label ids
                                     for heads, labels in self.init_dev]
        else:
            self.train_rows = batching.read_corpus(self.data_dir / "train.txt", self.vocab)
        self.train_lengths = [len(r) for r in self.train_rows]
        if self.streaming:
            ctx = self.context
            self.train_stream = batching.TokenStream(self.train_rows, len(self.vocab), cfg.batch_tokens // cfg.bptt,
                                                     cfg.bptt, rank=ctx.rank, world_size=ctx.world_size)
            self.n_batches = self.train_stream.n_chunks * ctx.world_size
        else:
            usable = [n for n in self.train_lengths if cfg.max_length is None or n <= cfg.max_length]
            if not usable:
                raise RecipeError(f"no training sentence has at most max_length={cfg.max_length} words")
            first_cap = batching.curriculum_length(cfg.max_length, cfg.curriculum_start, cfg.curriculum_step, 0)
            if cfg.curriculum_start is not None and not any(0 < n <= first_cap for n in self.train_lengths):
                raise RecipeError(f"no training sentence has at most curriculum_start={cfg.curriculum_start} words")
            # a full epoch (a curriculum's early epochs are shorter): sizes the linear schedule and the log line
            self.n_batches = len(batching.epoch_order(self.train_lengths, cfg.batch_tokens, seed=cfg.seed, epoch=0,
                                                      max_length=cfg.max_length))
        self.steps_per_epoch = batching.steps_per_epoch(self.n_batches, self.context.world_size)
        if self.steps_per_epoch < 1:
            raise RecipeError(f"{self.n_batches} batch(es) per epoch for {self.context.world_size} ranks; "
                              "lower batch_tokens or use fewer ranks")
        dev_path = self.data_dir / "dev.txt"
        if self.gold is not None:
            self.dev_rows = None if self.gold.dev is None else [row.words for row in self.gold.dev]
        else:
            self.dev_rows = batching.read_corpus(dev_path, self.vocab) if dev_path.is_file() else None
        self.dev_stream = None
        if self.streaming and self.dev_rows is not None:
            self.dev_stream = batching.TokenStream(self.dev_rows, len(self.vocab), cfg.batch_tokens // cfg.bptt,
                                                   cfg.bptt, rank=self.context.rank,
                                                   world_size=self.context.world_size)
        self.dev_masks = None
        if self.dev_rows is not None and self.objective.name == "mlm":
            self.dev_masks = fixed_masks(self.dev_rows, cfg.mask_rate, cfg.dev_mask_seed)
        self.dev_treebank = DevTreebank.load(self.data_dir) if cfg.dev_parse else DevTreebank()
        available = self.dev_treebank.available(self.model_class)
        decoders = (*DECODERS, *self.model_class.own_decoders)
        if cfg.decoder not in decoders:
            raise RecipeError(f"train.decoder: '{cfg.decoder}' does not apply to model '{self.config.model}'; "
                              f"choose one of {', '.join(decoders)}")
        if self.dev_rows is None and cfg.select == "dev_ppl":
            self.select = "train_loss"
            self.log("note: the data folder has no dev.txt; the best model is chosen by training loss")
        else:
            check_selectable(cfg.select, available, has_dev_text=self.dev_rows is not None)
            self.select = cfg.select
        if self.select == "dev_ppl" and not self.objective.reports_perplexity:
            self.select = "dev_loss"

    def _build_model(self) -> None:
        cfg = self.train_config
        torch.manual_seed(derived_seed(cfg.seed, "init"))
        model = self.model_class.from_config(self.config.model_config, self.vocab, where=str(self.run_dir.config),
                                             tags=self.tags)
        self.objective.check_model(model)
        check_precision(cfg.precision, self.config.model, self.model_class.mixed_precision, self.context.device,
                        self.log)
        if cfg.warm_start and not self.options.resume:  # a resumed run has its own weights in last.pt
            self._warm_start(model, Path(cfg.warm_start))
        self.model = model.to(self.context.device)
        self.model.train()
        # dropout and masks differ per rank (each rank sees different batches); init is identical everywhere
        torch.manual_seed(derived_seed(cfg.seed, "dropout", self.context.rank))
        self.mask_generator = torch.Generator().manual_seed(derived_seed(cfg.seed, "mask", self.context.rank))
        self.loss_module = LossModule(self.model, self.objective)
        self.wrapped = distributed.wrap(self.loss_module, self.context,
                                        find_unused_parameters=cfg.find_unused_parameters)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        parser_params = self._parser_parameters()
        separate = {id(p) for p in parser_params}
        self.optimizer = build_optimizer([p for p in self.params if id(p) not in separate], cfg, parser_params)
        # one update per batch, or several (RNGTr's ``updates: per_pass``): the schedule counts updates
        self.stepwise = self.objective.stepwise(self.model)
        if self.stepwise and self.context.distributed:
            raise RecipeError("one optimiser update per refinement pass (updates: per_pass) runs in one process "
                              "only: ranks would stop refining after different passes; use updates: per_batch")
        self.schedule = Schedule(self.optimizer, cfg,
                                 cfg.epochs * self.steps_per_epoch * self.objective.max_updates(self.model))

    def _parser_parameters(self) -> list[torch.nn.Parameter]:
        """The parser's parameters when ``parser_lr`` gives them a rate of their own (else none)."""
        if self.train_config.parser_lr is None:
            return []
        params = self.model.parser_parameters()
        if not params:
            raise RecipeError(f"train.parser_lr: model '{self.config.model}' has no parser separate from the rest "
                              "of its network; leave parser_lr null")
        return params

    def _warm_start(self, model: NeuralBackend, source: Path) -> None:
        """Load another run's best weights: same backend, same vocabularies (else the indices mean other words)."""
        other = load_run_config(source, lambda name: trainable_class(name).config_class)
        if other.model != self.config.model:
            raise ModelError(f"{source}: a '{other.model}' run cannot warm-start a '{self.config.model}' model")
        source_dir = RunDir(source)
        pairs = [(source_dir.vocab, self.vocab.to_json())]
        if self.tags is not None:
            pairs.append((source_dir.tags, self.tags.to_json()))
        for path, ours in pairs:
            if not path.is_file() or read_text_file(path, "vocabulary", VOCAB_MAX_BYTES) != ours:
                raise ModelError(f"{path}: differs from this run's {path.name}; warm starts need the run's "
                                 "data folder")
        try:
            model.load_state_dict(load_state_dict(source_dir.model))
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0]
            raise ModelError(f"{source_dir.model}: does not fit the configured model ({first})") from exc
        self.log(f"warm start from {source_dir.model}")

    def _prepare_run_dir(self) -> None:
        """Rank 0 lays out (or reopens) the run directory; the other ranks wait for it."""
        ctx = self.context
        if ctx.is_main:
            if not self.options.resume:
                if self.options.force and self.run_dir.path.is_dir():
                    clear_run_files(self.run_dir.path)
                self.run_dir.create(self.config.to_yaml(), self.data_dir,
                                    vocab_json=self.vocab.to_json() if self.gold is not None else None,
                                    tags_json=self.tags.to_json() if self.tags is not None else None)
        ctx.barrier()

    def _resume(self) -> None:
        state = load_train_state(self.run_dir.last)
        try:
            self.model.load_state_dict(state["model"])
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0]
            raise ModelError(f"{self.run_dir.last}: does not fit the configured model ({first})") from exc
        try:
            self.optimizer.load_state_dict(state["optimizer"])
            self.schedule.load_state_dict(state["schedule"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"{self.run_dir.last}: optimiser state does not fit ({exc})") from exc
        progress = state["progress"]
        try:
            self.progress = Progress(**progress)
        except TypeError as exc:
            raise ModelError(f"{self.run_dir.last}: unexpected progress record ({exc})") from exc
        position = state["position"]
        if position.get("order") is not None:
            self.order = batching.order_from_tensors(position["order"], position["offsets"])
        if self.streaming:
            streams = state.get("objective") or []
            if len(streams) == self.context.world_size:
                self.objective.load_state_dict(streams[self.context.rank], self.context.device)
        rng = state["rng"]
        if len(rng) == self.context.world_size:
            restore_rng(rng[self.context.rank], self.mask_generator)
        else:
            self.log(f"note: the checkpoint was written by {len(rng)} rank(s), this run has "
                     f"{self.context.world_size}; random streams are reseeded")
            torch.manual_seed(derived_seed(self.train_config.seed, f"dropout@{self.progress.step}", self.context.rank))
            self.mask_generator.manual_seed(derived_seed(self.train_config.seed, f"mask@{self.progress.step}",
                                                         self.context.rank))
        if self.context.is_main:
            self.run_dir.trim_metrics(self.progress.step)
        self.log(f"resuming {self.run_dir.path} at epoch {self.progress.epoch + 1}, step {self.progress.step}")

    # -------------------------------------------------------------------------------------------- loop

    def run(self) -> TrainResult:
        ctx, cfg = self.context, self.train_config
        if ctx.is_main:
            self.run_dir.start_manifest(
                model=self.config.model, seed=cfg.seed, data_dir=self.data_dir,
                command=self.options.command or command_line(), device=str(ctx.device),
                world_size=ctx.world_size, threads=torch.get_num_threads(),
                resumed_from_step=self.progress.step if self.options.resume else None,
                settings=self.told())
            self._record_baseline()
        ctx.barrier()
        if self.options.resume and self.progress.stopped_early:
            reason = "early_stop"
        else:
            n_params = sum(p.numel() for p in self.params)
            self.log(f"training {self.config.model} ({n_params:,} parameters) on {ctx.device}"
                     f"{f' x {ctx.world_size} ranks' if ctx.distributed else ''}: {len(self.train_rows):,} "
                     f"sentences, {self.steps_per_epoch} steps per epoch, up to {cfg.epochs} epochs")
            if note := training_view_note(self.data_dir):  # --train-on dev,test: scores are transductive
                self.log(note)
            with self.stop.installed():
                reason = self._loop()
        if not self.run_dir.model.is_file() and ctx.is_main:
            # stopped before any evaluation: the current weights are the only model there is
            save_model(self.run_dir.model, cpu_state_dict(self.model))
        result = TrainResult(self.run_dir.path, reason, self.progress.step, self.progress.epoch, self.select,
                             self.progress.best, self.last_record)
        if ctx.is_main:
            self.run_dir.finish_manifest(self._outcome(result))
            self.log(f"{_REASONS[reason]} after {result.step} steps ({result.epoch} complete epoch"
                     f"{'' if result.epoch == 1 else 's'}); best {self.select}: {_fmt(result.best)}; "
                     f"run saved in {self.run_dir.path}")
        ctx.barrier()
        return result

    def told(self) -> dict[str, Any]:
        """What this run was told beside its config (``manifest.json`` ``settings``), so a resume continues it."""
        seeds = self.options.seeds
        return {"max_tokens": self.options.max_tokens, "max_time": self.options.max_time,
                "seeds": list(seeds) if seeds is not None else None}

    def _record_baseline(self) -> None:
        """Right-branching's scores on this run's dev data, once per run (``manifest.json`` ``baselines``): what
        ``parse``, ``models`` and ``report`` compare the selected model with."""
        if "baselines" in self.run_dir.read_manifest() or not self.dev_treebank.available(backend_class(BASELINE)):
            return
        self.run_dir.record_baselines({BASELINE: baseline_metrics(self.dev_treebank)})

    def _outcome(self, result: TrainResult) -> dict[str, Any]:
        """How this invocation ended, for the manifest (a signal by name: SIGINT is Ctrl-C)."""
        outcome = {"reason": result.reason, "step": result.step, "epochs_completed": result.epoch,
                   "select": self.select, "best": result.best, "best_step": self.progress.best_step}
        if result.reason == "signal":
            outcome["signal"] = self.stop.received
        return outcome

    def _loop(self) -> str:
        """The epochs under one progress bar for the whole run (:class:`BudgetBar`)."""
        cfg, ctx, progress = self.train_config, self.context, self.progress
        self.bar = BudgetBar(started=self.started, budget_minutes=self.budget, token_budget=self.token_budget,
                             total_steps=cfg.epochs * self.steps_per_epoch, step=progress.step,
                             tokens_seen=progress.tokens_seen, epochs=cfg.epochs,
                             disable=self.options.quiet or not ctx.is_main)
        try:
            return self._epochs()
        finally:
            self.bar.close()

    def _epochs(self) -> str:
        cfg, ctx, progress = self.train_config, self.context, self.progress
        if self._tokens_spent():  # a resumed run whose token budget is already spent
            return "max_tokens"
        while progress.epoch < cfg.epochs:
            if self.order is None:
                self.order = self._epoch_order()
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

    def _epoch_order(self) -> list[list[int]]:
        """This epoch's batches: shuffled length buckets, or for continuous text the chunks in text order (one
        entry per rank and step, each rank reading the same chunk index of its own streams)."""
        cfg, ctx = self.train_config, self.context
        if self.streaming:
            return [[k] for k in range(self.train_stream.n_chunks) for _ in range(ctx.world_size)]
        epoch = self.progress.epoch
        cap = batching.curriculum_length(cfg.max_length, cfg.curriculum_start, cfg.curriculum_step, epoch)
        if cfg.curriculum_start is not None and self.context.is_main and cap != cfg.max_length:
            self.log(f"curriculum: epoch {epoch + 1} trains on sentences of at most {cap} words")
        return batching.epoch_order(self.train_lengths, cfg.batch_tokens, seed=cfg.seed, epoch=epoch,
                                    max_length=cap)

    def _epoch(self, first: int, n_steps: int) -> str | None:
        """Steps ``first``..``n_steps``-1 of the current epoch; returns why it stopped early, if it did
        (``early_stop`` after an ``eval_every`` evaluation, ``signal``, ``max_time``)."""
        cfg, ctx, progress = self.train_config, self.context, self.progress
        assert self.order is not None
        bar = self.bar
        epoch_nll, epoch_count, epoch_tokens, epoch_seconds = 0.0, 0.0, 0, 0.0
        window = [0.0, 0.0, 0.0]  # training NLL, predicted tokens and seconds since the last log_every line
        for k in range(first, n_steps):
            rows = batching.rank_batch(self.order, k, ctx.rank, ctx.world_size)
            t0 = time.monotonic()
            nll, count, tokens = self._train_step(rows)
            elapsed = time.monotonic() - t0
            progress.step += 1
            progress.batches_done = (k + 1) * ctx.world_size
            progress.nll_sum += nll
            progress.predicted += count
            progress.tokens += tokens
            progress.tokens_seen += tokens * ctx.world_size  # ranks read equal shares, to a batch
            progress.seconds += elapsed
            progress.train_seconds += elapsed
            self.pace.add(tokens, elapsed)
            epoch_nll, epoch_count, epoch_tokens = epoch_nll + nll, epoch_count + count, epoch_tokens + tokens
            epoch_seconds += elapsed
            window = [window[0] + nll, window[1] + count, window[2] + elapsed]
            if cfg.log_every and progress.step % cfg.log_every == 0:
                self._log_training(*window)
                window = [0.0, 0.0, 0.0]
            bar.advance(step=progress.step, tokens_seen=progress.tokens_seen, epoch=progress.epoch + 1)
            if k % 10 == 0 or k + 1 == n_steps:
                speed = epoch_tokens * ctx.world_size / max(epoch_seconds, 1e-9)  # training steps only
                bar.set_postfix(loss=f"{epoch_nll / max(epoch_count, 1):.3f}", tok_s=f"{speed:,.0f}",
                                lr=f"{self.schedule.lr:.2e}", seen=_fmt_tokens(progress.tokens_seen))
            if cfg.curve_every_tokens and not self._tokens_spent() and (
                    progress.tokens_seen // cfg.curve_every_tokens
                    > (progress.tokens_seen - tokens * ctx.world_size) // cfg.curve_every_tokens):
                self._measure_curve_point()
            if k + 1 == n_steps:
                return self._stop_reason()  # the epoch's end does its own evaluation and checkpoint
            if cfg.eval_every and progress.step % cfg.eval_every == 0 and self._evaluate():
                return "early_stop"
            reason = self._stop_reason()
            if reason is not None:
                return reason
            if cfg.checkpoint_every and progress.step % cfg.checkpoint_every == 0:
                self._checkpoint()
        return None

    def _log_training(self, nll: float, count: float, seconds: float) -> None:
        """The ``train.log_every`` record: the training loss over the last steps (this rank's batches), in
        metrics.jsonl (``"train_log": true``) and train.log — what the authors' scripts print every 100
        batches."""
        if not self.context.is_main or not count:
            return
        progress = self.progress
        record = {"step": progress.step, "epoch": self._epoch_position(), "train_log": True,
                  "lr": self.schedule.lr, "train_loss": nll / count, "tokens_seen": int(progress.tokens_seen),
                  "train_s": round(progress.train_seconds, 3), "wall_s": round(self._wall_seconds(), 3)}
        self.run_dir.append_metrics(record)
        line = (f"step {progress.step} | train loss {nll / count:.4f} | lr {self.schedule.lr:.2e} | "
                f"{_fmt_tokens(progress.tokens_seen)} tokens seen | {seconds:.1f} s in these steps")
        if isinstance(self.log, TrainLog) and sys.stderr.isatty():
            self.log.file_only(line)  # a terminal has it in the progress bar
        else:
            self.log(line)

    def _train_step(self, rows) -> tuple[float, float, int]:
        if self.streaming:
            assert isinstance(self.objective, StreamLM)
            if rows[0] == 0:  # a new pass over the text starts from a zero state
                self.objective.reset("train")
            self.objective.use("train")
            inputs = self.train_stream.chunk(rows[0])
            n_tokens = inputs["targets"].numel()
        elif self.gold is not None:
            inputs = self._gold_inputs(self.gold.train, self.init_train, rows)
            n_tokens = int(inputs["mask"].sum())
        else:
            batch = batching.collate(self.train_rows, rows, self.vocab.pad_index)
            inputs = self.objective.prepare(batch.tokens, batch.mask, generator=self.mask_generator)
            n_tokens = batch.n_tokens
        device = self.context.device
        inputs = {k: v.to(device, non_blocking=True) for k, v in inputs.items()}
        if self.stepwise:  # several updates per batch, each loss computed after the previous update
            nll_sum = count_sum = 0.0
            for out in self.objective.updates(self.model, **inputs):
                self._update(out.loss)
                nll_sum, count_sum = nll_sum + float(out.nll_sum), count_sum + float(out.count)
            return nll_sum, count_sum, n_tokens
        with autocast(self.train_config.precision, device):
            loss, nll, count = self.wrapped(**inputs)
        self._update(loss)
        return float(nll), float(count), n_tokens

    def _update(self, loss: torch.Tensor) -> None:
        """One optimiser update on ``loss`` (whose graph is built, gradients not yet taken)."""
        loss_value = float(loss.detach())
        finite = math.isfinite(loss_value)
        if self.context.distributed:  # every rank must raise together, or the others wait in backward forever
            finite = self.context.max(0.0 if finite else 1.0) == 0.0
        if not finite:
            raise RecipeError(f"training diverged at step {self.progress.step + 1}: the loss is {loss_value}; "
                              "lower train.lr or set train.clip")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_gradients(self.params, self.train_config.clip)
        self.optimizer.step()
        self.schedule.after_step()

    def _gold_inputs(self, rows: list[GoldRow], initial, indices) -> dict[str, torch.Tensor]:
        """Prepared supervised inputs for the gold rows ``indices`` (with their initial graphs when given)."""
        batch = collate_gold([rows[i] for i in indices], self.vocab.pad_index,
                             None if initial is None else [initial[i] for i in indices], self.model.word_inputs)
        tokens, mask = batch.pop("tokens"), batch.pop("mask")
        return self.objective.prepare(tokens, mask, generator=self.mask_generator, **batch)

    def _stop_reason(self) -> str | None:
        """A stop every rank agrees on: a signal on any rank, the time budget about to run out, or the token
        budget read."""
        local: str | None = None
        if self.stop.received is not None:
            local = "signal"
        elif self.deadline is not None and time.monotonic() + self._kept_back() >= self.deadline:
            local = "max_time"
            self._note_late_end()
        elif self._tokens_spent():
            local = "max_tokens"
        if not self.context.distributed:
            return local
        codes = {None: 0, "max_tokens": 1, "max_time": 2, "signal": 3}
        agreed = int(self.context.max(codes[local]))
        return {code: name for name, code in codes.items()}[agreed]

    def _tokens_spent(self) -> bool:
        return self.token_budget is not None and self.progress.tokens_seen >= self.token_budget

    def _reserve(self) -> float:
        """Seconds the final evaluation and checkpoint take: the last evaluation's measured time once there was
        one; before, an estimate from this invocation's warm steps (:class:`_Pace`), not from the first step."""
        if self.last_eval_seconds is not None:
            evaluation = self.last_eval_seconds
        elif self.dev_rows is None or (speed := self.pace.tokens_per_second()) is None:
            evaluation = 0.0
        else:
            # dev forward passes run at about the training speed; parsing the dev set costs as much again
            evaluation = 2.0 * sum(len(r) for r in self.dev_rows) / speed / self.context.world_size
        checkpoint = self.last_checkpoint_seconds if self.last_checkpoint_seconds is not None else 0.5
        return 1.2 * (evaluation + checkpoint) + 0.25

    def _kept_back(self) -> float:
        """The time kept back from the budget at its end: the reserve, at most RESERVE_SHARE of the budget."""
        return capped_reserve(self._reserve(), self.started, self.deadline)

    def _note_late_end(self) -> None:
        """Say so when the final evaluation will run past the budget (its reserve was capped)."""
        reserve, kept = self._reserve(), self._kept_back()
        if reserve - kept > 1.0 and self.context.is_main:
            self.log(f"note: the final evaluation is expected to take about {reserve:.0f} s, more than the "
                     f"{kept:.0f} s ({RESERVE_SHARE:.0%} of the {self.budget:g}-minute budget) kept back for it; the "
                     f"run ends about {reserve - kept:.0f} s after the budget")

    # ---------------------------------------------------------------------------------------- evaluation

    def _dev_metrics(self) -> dict[str, Any]:
        """Dev loss (perplexity) and, where dev has gold trees, the parsing metrics; every rank gets them."""
        cfg, ctx = self.train_config, self.context
        record: dict[str, Any] = {}
        if self.dev_rows is not None:
            dev_loss = self._dev_loss()
            record["dev_loss"] = dev_loss
            if self.objective.reports_perplexity:
                record["dev_ppl"] = _exp(dev_loss)
        parse_metrics: dict[str, float | None] = {}
        if ctx.is_main and self.dev_treebank.available(self.model_class):
            self.model.eval()
            try:
                parse_metrics = parsing_metrics(self.model, self.dev_treebank, decoder=cfg.decoder,
                                                init=self.init_dev, progress=not self.options.quiet)
            finally:
                self.model.train()
        record.update(ctx.broadcast(parse_metrics))
        return record

    def _measure_curve_point(self) -> None:
        """A learning-curve record (``curve_every_tokens``): dev measured and logged, nothing else touched — the
        schedule, model selection, patience and the training statistics since the last evaluation stay as they
        were, so the run trains exactly as it would without these records."""
        t0 = time.monotonic()
        progress = self.progress
        record: dict[str, Any] = {"step": progress.step, "epoch": self._epoch_position(), "curve": True,
                                  "lr": self.schedule.lr, "tokens_seen": int(progress.tokens_seen)}
        record.update(self._dev_metrics())
        record["eval_s"] = round(time.monotonic() - t0, 3)
        record["wall_s"] = round(self._wall_seconds(), 3)
        if self.context.is_main:
            self.run_dir.append_metrics(record)
            shown = [f"{key[4:]} {_fmt(record[key])}" for key in ("dev_ppl", "dev_dda", "dev_uda", "dev_uf1")
                     if record.get(key) is not None]
            self.log(f"curve point at {_fmt_tokens(progress.tokens_seen)} training tokens: {', '.join(shown)}")

    def _epoch_position(self) -> float:
        """Epochs completed plus the share of the current epoch's batches done (a curriculum's early epochs are
        shorter than a full one)."""
        size = len(self.order) if self.order is not None else self.n_batches
        return round(self.progress.epoch + self.progress.batches_done / max(size, 1), 4)

    def _evaluate(self) -> bool:
        """Dev metrics → metrics.jsonl, model.pt when best, schedule; True when early stopping triggers."""
        cfg, ctx, progress = self.train_config, self.context, self.progress
        t0 = time.monotonic()
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
            record["train_ppl"] = _exp(nll / predicted)
        record.update(self._dev_metrics())
        value = record.get(self.select)
        lower_better = self.select in LOWER_IS_BETTER
        improved = value is not None and (
            progress.best is None or (value < progress.best if lower_better else value > progress.best))
        if improved:
            progress.best, progress.best_step, progress.bad_evals = value, progress.step, 0
            if ctx.is_main:
                save_model(self.run_dir.model, cpu_state_dict(self.model))
        else:
            progress.bad_evals += 1
        progress.evaluations += 1
        self.schedule.after_eval(record.get("dev_loss", record.get("train_loss")))
        stop_early = cfg.patience is not None and progress.bad_evals >= cfg.patience
        progress.stopped_early = stop_early
        progress.nll_sum = progress.predicted = progress.tokens = progress.seconds = 0.0
        self.last_eval_seconds = time.monotonic() - t0
        progress.wall_seconds = self._wall_seconds()
        record.update({"select": self.select, "best": improved, "best_value": progress.best,
                       "eval_s": round(self.last_eval_seconds, 3), "train_s": round(progress.train_seconds, 3),
                       "wall_s": round(progress.wall_seconds, 3)})
        self.last_record = record
        if ctx.is_main:
            self.run_dir.append_metrics(record)
            self.log(_summary(record, self.select))
        return stop_early

    def _dev_loss(self) -> float:
        """Mean dev NLL over this rank's share of dev (batches, or its streams), summed over ranks."""
        assert self.dev_rows is not None
        if self.dev_stream is not None:
            nll_sum, count = stream_loss(self.loss_module, self.dev_stream, device=self.context.device, name="dev")
        else:
            lengths = [len(r) for r in self.dev_rows]
            batches = batching.shard(batching.eval_order(lengths, self.train_config.batch_tokens),
                                     self.context.rank, self.context.world_size)
            if self.gold is not None:
                assert self.gold.dev is not None
                dev, initial = self.gold.dev, self.init_dev_ids
                inputs_for = lambda indices: self._gold_inputs(dev, initial, indices)  # noqa: E731
            else:
                inputs_for = text_inputs(self.objective, self.dev_rows, self.vocab.pad_index, self.dev_masks)
            nll_sum, count = sentence_loss(self.loss_module, batches, inputs_for, device=self.context.device)
        nll_sum, count = self.context.sum([nll_sum, count])
        return nll_sum / count if count else float("nan")

    def _wall_seconds(self) -> float:
        """Wall-clock seconds of the run so far (learning curves against time read it from metrics.jsonl)."""
        return self.wall_base + (time.monotonic() - self.started)

    # ---------------------------------------------------------------------------------------- checkpoints

    def _checkpoint(self) -> None:
        """Write last.pt (rank 0), with every rank's random state; ranks holding different weights is an error."""
        ctx = self.context
        started = time.monotonic()
        rng = ctx.gather(capture_rng(self.mask_generator))
        streams = ctx.gather(self.objective.state_dict()) if self.streaming else None
        state_dict = cpu_state_dict(self.model)
        replicas = ctx.gather(state_digest(state_dict)) if ctx.distributed else []
        if len(set(replicas)) > 1:
            raise ResourceError(f"the {ctx.world_size} ranks hold different parameters at step "
                                f"{self.progress.step}; distributed training went out of sync")
        if not ctx.is_main:
            return
        order, offsets = batching.order_to_tensors(self.order) if self.order is not None else (None, None)
        self.progress.wall_seconds = self._wall_seconds()
        state = {
            "format": FORMAT,
            "version": VERSION,
            "model": state_dict,
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.schedule.state_dict(),
            "rng": rng,
            "position": {"epoch": self.progress.epoch, "batches_done": self.progress.batches_done,
                         "order": order, "offsets": offsets},
            "progress": asdict(self.progress),
            "world_size": ctx.world_size,
            "replicas": replicas,
            "objective": streams,
        }
        atomic_torch_save(state, self.run_dir.last)
        self.last_checkpoint_seconds = time.monotonic() - started


_REASONS = {
    "completed": "finished",
    "early_stop": "stopped early (no improvement)",
    "max_time": "stopped at the --max-time budget",
    "max_tokens": "stopped at the --max-tokens budget",
    "signal": "stopped on request",
}


def _exp(value: float) -> float:
    return math.exp(value) if value < 700 else float("inf")


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _summary(record: dict[str, Any], select: str) -> str:
    parts = [f"epoch {record['epoch']:g} step {record['step']}"]
    if record.get("train_loss") is not None:
        parts.append(f"train loss {record['train_loss']:.4f}")
    for key, label in (("dev_ppl", "dev ppl"), ("dev_loss", "dev loss"), ("dev_dda", "DDA"), ("dev_uda", "UDA"),
                       ("dev_las", "LAS"), ("dev_uf1", "UF1")):
        if record.get(key) is not None and not (key == "dev_loss" and "dev_ppl" in record):
            parts.append(f"{label} {record[key]:.2f}")
    if record.get("tokens_per_s"):
        parts.append(f"{record['tokens_per_s']:,.0f} tok/s")
    parts.append(f"best {select} {_fmt(record['best_value'])}{' *' if record['best'] else ''}")
    return " | ".join(parts)
