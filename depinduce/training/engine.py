"""``train()``: one training invocation — the defaults filled in, the run directory locked, and the loop the
backend's objective calls for: the gradient loop (:mod:`.gradient`, every neural backend) or EM
(:mod:`.em`, the DMV).  Both run under one :class:`~.trainrun.TrainingRun` (run directory, manifest, budgets,
signals, selection and patience, ``last.pt``, the end), and the gradient loop reads its data through one
interface whatever the regime (:mod:`.training_data`).

After every epoch (and every ``eval_every`` steps) a run measures dev loss/perplexity with fixed dev masks and,
when dev has gold trees, the parsing metrics through ``parse`` + ``evaluate``; it appends them to
``metrics.jsonl``, keeps the best model by ``select`` in ``model.pt``, steps a plateau schedule, and stops early
after ``patience`` evaluations without improvement.  ``last.pt`` is written after every epoch, every
``checkpoint_every`` steps and when training stops (``--max-time``, SIGTERM/SIGINT).

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

from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import click

from depinduce.errors import NotFoundError, UsageError
from depinduce.io.filenames import CONFIG_FILE
from depinduce.training import defaults, distributed
from depinduce.training.budgets import RESERVE_SHARE, capped_reserve, fmt_minutes, fmt_tokens
from depinduce.training.config import load_recipe
from depinduce.training.em import EMLoop
from depinduce.training.gradient import GradientLoop
from depinduce.training.options import TrainOptions, TrainResult
from depinduce.training.records import TrainLog
from depinduce.training.run import FreshStart, recorded_settings
from depinduce.training.trainrun import Log, Progress, derived_seed, open_records, trainable_class

# Where other code and tests have always found them: the records, the helpers and the loops.
__all__ = ["EMLoop", "GradientLoop", "Progress", "RESERVE_SHARE", "TrainOptions", "TrainResult",
           "capped_reserve", "derived_seed", "train", "trainable_class"]


def _stderr(message: str) -> None:
    click.echo(message, err=True)


def train(options: TrainOptions, log: Log = _stderr) -> TrainResult:
    """Train (or resume) one run; joins the torchrun process group when launched under torchrun.  The budgets
    come checked (:func:`depinduce.api.train` checks them where the options enter)."""
    if options.threads is not None and options.threads < 1:
        raise UsageError("--threads must be at least 1")
    context = distributed.setup(options.device)
    try:
        shown = log if (context.is_main and not options.quiet) else (lambda _: None)
        # every status line also goes to RUN_DIR/train.log (written by the first rank, --quiet or not)
        tee = TrainLog(shown, keep=context.is_main)
        options, chosen = _with_defaults(options, context)
        # a new run failing before its first step takes back what it made, so the same command runs again
        fresh = FreshStart(Path(options.run_dir)) if context.is_main and not options.resume else None
        loop: GradientLoop | EMLoop | None = None

        def trained() -> bool:
            return loop is not None and loop.progress.step > 0

        try:
            with ExitStack() as stack:
                open_records(stack, options, context, tee, fresh=fresh, trained=trained)
                loop = loop_class(options)(options, context, tee)
                loop.run.open_log(stack, tee)
                if chosen:  # said once the settings are known to be valid, so an error stays a single line
                    budgets = [f"time budget {fmt_minutes(loop.run.budget)}"] if loop.run.budget is not None else []
                    if loop.run.token_budget is not None:
                        budgets.append(f"token budget {fmt_tokens(loop.run.token_budget)} training tokens")
                    tee(f"{chosen}, {', '.join(budgets) or f'time budget {fmt_minutes(None)}'}")
                result = loop.train()
        except BaseException:
            if fresh is not None and not trained():
                fresh.take_back_folders()  # the lock released: its file lay in the run folder's parent
            raise
        # every rank done before the group goes away: a rank whose peer tears gloo down mid-exchange aborts
        context.barrier()
        return result
    finally:
        distributed.teardown(context)


def loop_class(options: TrainOptions) -> type[GradientLoop] | type[EMLoop]:
    """The gradient loop, or for objective ``em`` (the DMV) EM with the same run (:mod:`.em`)."""
    config = Path(options.run_dir) / CONFIG_FILE if options.resume and options.run_dir else None
    recipe = config if config is not None and config.is_file() else options.recipe
    name = options.model or (load_recipe(recipe).get("model") if recipe is not None else None)
    if isinstance(name, str) and trainable_class(name).capabilities.objective == "em":
        return EMLoop
    return GradientLoop


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
