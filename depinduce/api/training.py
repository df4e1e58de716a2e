"""``depinduce.train(...)``: ``depinduce train`` from Python.

``depinduce train`` calls :func:`train` itself, so a recipe, its overrides and every default are resolved by the
same code whichever way a run is started.  Recipe values are given as keyword arguments (``lr=1e-3``, or
``model_config={"n_layers": 4}`` for a nested one) instead of ``--set KEY=VALUE`` strings.

Several seeds (``seeds=[0, 1, 2]``, ``--seeds 0,1,2``) are several independent runs, ``OUT/seed-K``, trained one
after another: each is exactly the run ``train --seed K --out OUT/seed-K`` makes, and nothing else is written in
``OUT``, so a scheduler (a SLURM array job, ``xargs -P``) may launch the same runs one per process instead and
``depinduce report OUT`` reads them the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from depinduce.api.seed_jobs import (SEED_FOLDER, STOP_EXIT_CODES, SeedRun, TrainCall, resume_hint,
                                    setting_strings)
from depinduce.api.words import python_words
from depinduce.display import say as shown, shell_command
from depinduce.io.filenames import CONFIG_FILE, LAST_FILE, MANIFEST_FILE
from depinduce.training.budgets import parse_token_count
from depinduce.errors import (DepinduceError, NotFoundError, RecipeError, ResourceError, RunDirectoryError,
                              UsageError)
from depinduce.data.run_files import read_manifest
from depinduce.io.outputs import folder_kind

if TYPE_CHECKING:
    from depinduce.training.options import TrainResult
    from depinduce.training.run import RecordedSettings

SEED_DIR = SEED_FOLDER  # a multi-seed run's per-seed folder under OUT
_DONE = ("completed", "early_stop")  # how a run ends for good; a resume starts nothing more in it
__all__ = ["STOP_EXIT_CODES", "SEED_DIR", "SeedRun", "TrainCall", "parse_token_count", "recorded_seeds",
           "resume_hint", "seed_list", "stop_exit_code", "train"]


def _path(value: str | PathLike[str] | None) -> Path | None:
    return None if value is None else Path(value)


@python_words
def train(model: str | None = None, data: str | PathLike[str] | None = None, out: str | PathLike[str] | None = None,
          recipe: str | PathLike[str] | None = None, *, settings: Sequence[str] = (), device: str = "auto",
          threads: int | None = None, seed: int | None = None, resume: bool = False, max_time: float | None = None,
          max_tokens: int | str | None = None, init_train: str | PathLike[str] | None = None,
          init_dev: str | PathLike[str] | None = None,
          warm_start: str | PathLike[str] | None = None, encoder_path: str | PathLike[str] | None = None,
          quiet: bool = False, force: bool = False, seeds: int | str | Sequence[int] | None = None,
          jobs: int | None = None, seed_group: Sequence[int] | None = None, **overrides: Any) -> Path | list[Path]:
    """Train (or resume) a neural backend on a ``depinduce preprocess`` data folder; returns the run directory.

    The arguments are ``depinduce train``'s options (``data`` is ``--data``, ``out`` is ``--out``, ``settings``
    are ``--set`` strings); ``**overrides`` are further recipe values.  Progress and summaries go to stderr
    (none with ``quiet``), never stdout; every problem is a :class:`DepinduceError`.

    ``seeds`` (``--seeds``): a list of seeds, or N for seeds 0..N-1; one run per seed in ``out/seed-K``, one
    after another, and the list of those run directories is returned instead of one path.  With ``resume``,
    each seed's run is resumed, a finished one skipped, and one never started is started from a sibling's
    ``config.yaml`` with its own seed.  A stop on request (Ctrl-C, SIGTERM) ends the current seed cleanly and
    starts no further one.  ``jobs`` (``--jobs K``): K seeds at once, each in a process of its own
    (:mod:`depinduce.api.seed_jobs`).  The seeds are recorded in each run, so a resume without ``seeds``
    continues them all (with ``seeds``: those, e.g. one more).  ``seed_group``: the seeds a one-seed run belongs to
    (what ``--jobs`` tells each seed's process).
    """
    from depinduce.training.budgets import checked_budgets

    budgets = checked_budgets(max_time, max_tokens)  # the one check, for the command line and Python alike
    call = TrainCall(model=model, data=data, out=out, recipe=recipe, settings=tuple(settings), device=device,
                     threads=threads, seed=seed, resume=resume, max_time=budgets.max_time,
                     max_tokens=budgets.max_tokens, init_train=init_train, init_dev=init_dev, warm_start=warm_start,
                     encoder_path=encoder_path, quiet=quiet, force=force,
                     seed_group=tuple(seed_group) if seed_group is not None else None, recipe_values=overrides)
    if seeds is None and resume and out is not None and not (Path(out) / CONFIG_FILE).is_file():
        seeds = recorded_seeds(Path(out))  # OUT holds the seed-K runs of one --seeds call: all of them
    if seeds is not None:
        if seed is not None:
            raise UsageError("--seeds and --seed exclude each other: give the seeds as --seeds 0,1,2 (or --seeds N "
                             "for seeds 0..N-1)")
    elif jobs is not None:
        raise UsageError("--jobs runs several seeds at once: give the seeds with --seeds (0,1,2,3 or a count)")
    try:
        return _train_one(call).run_dir if seeds is None else _train_seeds(call, seed_list(seeds), jobs=jobs)
    except RecipeError as exc:
        raise _as_keywords(exc, overrides) from None


def _as_keywords(exc: RecipeError, overrides: Mapping[str, Any]) -> RecipeError:
    """A recipe error about a keyword argument (``lr="fast"``, ``model_config={"nope": 1}``) in the words of that
    argument: the recipe reads them as ``--set`` strings, which the caller never wrote."""
    message = str(exc)
    for key, value in overrides.items():
        for item in setting_strings(key, value):
            name = item.split("=", 1)[0]
            shown = name if "." not in name else "{}[{!r}]".format(*name.split(".", 1))
            message = message.replace(f"--set {item}", f"{shown}={item.split('=', 1)[1]}")
            message = message.replace(f"--set {name}: unknown key;", f"{shown}: unknown keyword argument, no "
                                                                   "recipe value of that name;")
            message = message.replace(f"--set {name}:", f"{shown}:")
    return exc if message == str(exc) else RecipeError(message)


def _train_one(call: TrainCall) -> TrainResult:
    """One run through the engine; its result (how it ended matters to a multi-seed call)."""
    from depinduce.training.engine import train as run_training
    from depinduce.training.options import TrainOptions
    from depinduce.training.run import check_run_dir

    if call.resume and call.out is not None:  # first: a missing run is the problem, not the data it would need
        check_run_dir(Path(call.out), force=call.force, resume=True)
    items = list(call.settings)
    for key, value in call.recipe_values.items():
        items.extend(setting_strings(key, value))
    # recorded in config.yaml as absolute paths, so a run says what it read
    for key, path in (("train.init_train", call.init_train), ("train.init_dev", call.init_dev),
                      ("train.warm_start", call.warm_start), ("model_config.encoder_path", call.encoder_path)):
        if path is not None:
            checked = Path(path)
            wanted_dir = key in ("train.warm_start", "model_config.encoder_path")
            if not (checked.is_dir() if wanted_dir else checked.is_file()):
                raise NotFoundError(f"{path}: no such {'folder' if wanted_dir else 'file'}")
            items.append(f"{key}={checked.resolve()}")
    options = TrainOptions(
        data_dir=_path(call.data), run_dir=_path(call.out), model=call.model, recipe=_path(call.recipe),
        overrides=tuple(items), device=call.device, threads=call.threads, seed=call.seed, resume=call.resume,
        max_time=call.max_time, max_tokens=call.max_tokens, quiet=call.quiet, force=call.force,
        seeds=call.seed_group,
    )
    from depinduce.training import distributed

    try:
        return run_training(options)
    except RuntimeError as exc:  # under torchrun: a peer rank that died ends this one with one line
        lost = distributed.peer_failure(exc) if distributed.under_torchrun() else None
        if lost is None:
            raise
        raise ResourceError(f"rank {distributed.launched_rank()}: lost the other ranks ({lost}); one died or was "
                            f"stopped — `{shell_command('depinduce', 'train', '--resume', '--out', call.out)}` "
                            "continues from the last checkpoint") from None


def seed_list(seeds: int | str | Sequence[int]) -> list[int]:
    """``--seeds``: ``"0,1,2,3"``, ``"0-3"`` (a range, ends included; ``"0-3,8"``) or a list are those seeds,
    ``"4"`` or 4 the seeds 0..3; distinct, at least 0."""
    if isinstance(seeds, str):
        parts = [part.strip() for part in seeds.split(",")]
        if not all(re.fullmatch(r"-?\d+|\d+-\d+", part) for part in parts):
            raise UsageError(f"--seeds {seeds!r}: give comma-separated integers (0,1,2), ranges (0-7) or a count N")
        numbers: list[int] = []
        for part in parts:
            first, _, last = part.partition("-") if not part.startswith("-") else (part, "", "")
            if last and int(last) < int(first):
                raise UsageError(f"--seeds {seeds!r}: the range {part} runs backwards; write {last}-{first}")
            numbers.extend(range(int(first), int(last) + 1) if last else [int(first)])
        seeds = numbers[0] if len(numbers) == 1 and "-" not in parts[0] else numbers
    if isinstance(seeds, bool) or not isinstance(seeds, (int, Sequence)):
        raise UsageError(f"seeds: give a list of integers or a count, not {type(seeds).__name__}")
    if isinstance(seeds, int):
        if seeds < 1:
            raise UsageError(f"--seeds {seeds}: a count of seeds must be at least 1")
        return list(range(seeds))
    chosen = list(seeds)
    if not chosen or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in chosen):
        raise UsageError(f"--seeds {chosen}: seeds must be integers of at least 0")
    if len(set(chosen)) != len(chosen):
        raise UsageError(f"--seeds {chosen}: a seed is repeated; each seed is one run")
    return chosen


def _parent_dir(model: str | None, recipe: str | PathLike[str] | None, out: str | PathLike[str] | None,
                resume: bool) -> Path:
    """OUT, or (not resuming) the run directory ``train`` would choose for the model: runs/NAME, runs/NAME-2 …"""
    if out is not None:
        return Path(out)
    if resume:
        raise UsageError("--resume needs --out RUN_DIR: the folder holding the seed-K runs to continue")
    from depinduce.training import defaults, distributed

    if distributed.under_torchrun():  # each rank would pick its own fresh folder
        raise UsageError("under torchrun give --out RUN_DIR: every rank must write to the same runs")
    from depinduce.training.config import load_recipe

    name = model or (load_recipe(defaults.recipe_path(recipe)).get("model") if recipe is not None else None)
    if name is None:
        raise UsageError("no model given: pass --model NAME or a recipe with a 'model' key")
    return defaults.fresh_run_dir(name)


def _ended_for_good(run_dir: Path) -> bool:
    """The run's last (re)start ended completed or stopped early: a resume has nothing left to do in it."""
    try:
        runs = read_manifest(run_dir / MANIFEST_FILE)["runs"]
    except DepinduceError:  # none yet, or damaged: the resume itself says which
        return False
    return bool(runs) and (runs[-1].get("outcome") or {}).get("reason") in _DONE


def _settings(run_dir: Path) -> RecordedSettings | None:
    """A seed run's recorded settings (None: not started far enough to have a manifest)."""
    from depinduce.training.run import recorded_settings

    return recorded_settings(run_dir)


def recorded_seeds(parent: Path) -> list[int] | None:
    """The ``--seeds`` the ``seed-K`` runs in ``parent`` were started with, every call's together (a resume may
    add seeds); None when no run there recorded them."""
    if not parent.is_dir():
        return None
    seeds: list[int] = []
    for run in sorted(parent.glob(SEED_DIR.format(seed="*"))):
        recorded = _settings(run) if (run / MANIFEST_FILE).exists() else None
        for seed in (recorded.seeds or []) if recorded is not None else []:
            if seed not in seeds:
                seeds.append(seed)
    return seeds or None


def _changes_settings(call: TrainCall) -> bool:
    """Whether the call sets anything a run's config.yaml holds (which a resume may not change)."""
    paths = (call.init_train, call.init_dev, call.warm_start, call.encoder_path)
    return (call.recipe is not None or bool(call.settings) or any(path is not None for path in paths)
            or bool(call.recipe_values))


def _train_seeds(call: TrainCall, seeds: list[int], *, jobs: int | None) -> list[Path]:
    """One run per seed in ``OUT/seed-K``, each exactly as a one-seed call makes it: one after another in this
    process (under torchrun, every rank in one process group), or ``jobs`` at once in processes of their own."""
    from depinduce.training import distributed

    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs {jobs}: give the number of seeds to train at once (at least 1)")
    if jobs is not None and jobs > 1 and distributed.under_torchrun():
        raise UsageError("--jobs starts its own processes; under torchrun the ranks already share each run — "
                         "use one or the other")
    if call.resume and _changes_settings(call):
        raise UsageError("--resume continues each run with its own config.yaml; --recipe, --set and recipe "
                         "values cannot change it")
    parent = _parent_dir(call.model, call.recipe, call.out, call.resume)
    quiet = call.quiet or distributed.launched_rank() != 0  # rank 0 alone says what the runs do
    say = (lambda line: None) if quiet else shown
    plan = _seed_plan(replace(call, quiet=quiet), parent, seeds)
    if jobs is not None and jobs > 1:
        from depinduce.api.seed_jobs import run_seed_jobs

        return run_seed_jobs(plan, jobs, parent=parent, device=call.device, threads=call.threads, quiet=quiet)
    done: list[Path] = []
    with distributed.session(call.device) if distributed.under_torchrun() else nullcontext():
        for number, item in enumerate(plan, start=1):
            say(f"seed {item.seed} ({number} of {len(plan)}): {item.run}")
            done.append(item.run)
            if item.call is None:
                say(f"{item.run}: already finished; skipped")
                continue
            if _train_one(item.call).reason == "signal":
                say(resume_hint(parent, seeds, [item.seed], [later.seed for later in plan[number:]]))
                break
    return done


def _seed_plan(call: TrainCall, parent: Path, seeds: list[int]) -> list[SeedRun]:
    """What each seed's run does: start, resume, start from a sibling's config (never started), or nothing."""
    runs = [parent / SEED_DIR.format(seed=seed) for seed in seeds]
    sibling = next((run / CONFIG_FILE for run in runs if (run / CONFIG_FILE).is_file()), None)
    if call.resume and sibling is None:
        raise RunDirectoryError(f"{parent}: holds none of the runs {', '.join(r.name for r in runs)}; nothing to "
                                "resume (start them without --resume)")
    group = tuple(seeds)
    # a resume passes on only what a resume may: the budgets, the device and threads, the data folder
    common = TrainCall(model=call.model, data=call.data, quiet=call.quiet, device=call.device,
                       threads=call.threads, max_time=call.max_time, max_tokens=call.max_tokens, seed_group=group)
    fresh = common  # a seed never started joins the others: their data folder and budgets, unless given
    if call.resume:
        started = next((told for run in runs if (run / MANIFEST_FILE).exists()
                        and (told := _settings(run)) is not None), None)
        if started is not None:
            fresh = replace(common, data=call.data if call.data is not None else started.data_dir,
                            max_time=call.max_time if call.max_time is not None else started.max_time,
                            max_tokens=call.max_tokens if call.max_tokens is not None else started.max_tokens)
    plan = []
    for seed, run in zip(seeds, runs):
        one: TrainCall | None
        if call.resume and _ended_for_good(run):
            one = None
        elif call.resume and (run / CONFIG_FILE).is_file() and (run / LAST_FILE).is_file():
            one = replace(common, out=run, recipe=None, resume=True)
        elif call.resume:  # never started, or stopped before its first checkpoint: (re)started as its siblings
            one = replace(fresh, out=run, recipe=sibling, seed=seed, force=folder_kind(run) == "run")
        else:
            one = replace(call, out=run, seed=seed, seed_group=group)
        plan.append(SeedRun(seed, run, one))
    return plan


def stop_exit_code(runs: Sequence[Path]) -> int:
    """``train``'s exit code: 0, or 128 + the signal's number when a run's last (re)start ended on a stop request
    (Ctrl-C: 130, SIGTERM: 143) or the call was stopped before a run could record it (``SeedRuns.stop``), so a
    scheduler or script never takes an interrupted run for a finished one."""
    stop = getattr(runs, "stop", None)
    if stop is not None:
        return STOP_EXIT_CODES.get(stop, 1)
    for run in runs:
        try:
            starts = read_manifest(run / MANIFEST_FILE)["runs"]
        except DepinduceError:
            continue
        outcome = (starts[-1].get("outcome") or {}) if starts else {}
        if outcome.get("reason") == "signal":
            return STOP_EXIT_CODES.get(outcome.get("signal") or "", 1)
    return 0
