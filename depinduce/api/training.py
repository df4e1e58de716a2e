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

import json
from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

from depinduce.errors import NotFoundError, RecipeError, RunDirectoryError, UsageError

SEED_DIR = "seed-{seed}"  # a multi-seed run's per-seed folder under OUT
_DONE = ("completed", "early_stop")  # how a run ends for good; a resume starts nothing more in it
# train()'s own options, as _train_seeds receives them beside the recipe values (**overrides)
_PASSED = frozenset({"settings", "device", "threads", "max_time", "max_tokens", "init_train", "init_dev",
                     "warm_start", "encoder_path", "force"})


def _setting(key: str, value: Any) -> list[str]:
    """A keyword override as the ``--set`` strings the recipe resolver reads (a mapping: one per nested key)."""
    if isinstance(value, Mapping):
        if key not in ("train", "model_config"):
            raise RecipeError(f"{key}: only 'train' and 'model_config' take a mapping of recipe values")
        return [item for name, inner in value.items() for item in _setting(f"{key}.{name}", inner)]
    # strings stay raw (a string field keeps the text); anything else as JSON, which YAML reads back unchanged
    return [f"{key}={value if isinstance(value, str) else json.dumps(value)}"]


def _path(value: str | PathLike[str] | None) -> Path | None:
    return None if value is None else Path(value)


def train(model: str | None = None, data: str | PathLike[str] | None = None, out: str | PathLike[str] | None = None,
          recipe: str | PathLike[str] | None = None, *, settings: Sequence[str] = (), device: str = "auto",
          threads: int | None = None, seed: int | None = None, resume: bool = False, max_time: float | None = None,
          max_tokens: int | str | None = None, init_train: str | PathLike[str] | None = None,
          init_dev: str | PathLike[str] | None = None,
          warm_start: str | PathLike[str] | None = None, encoder_path: str | PathLike[str] | None = None,
          quiet: bool = False, force: bool = False, seeds: int | str | Sequence[int] | None = None,
          **overrides: Any) -> Path | list[Path]:
    """Train (or resume) a neural backend on a ``depinduce preprocess`` data folder; returns the run directory.

    The arguments are ``depinduce train``'s options (``data`` is ``--data``, ``out`` is ``--out``, ``settings``
    are ``--set`` strings); ``**overrides`` are further recipe values.  Progress and summaries go to stderr
    (none with ``quiet``), never stdout; every problem is a :class:`DepinduceError`.

    ``seeds`` (``--seeds``): a list of seeds, or N for seeds 0..N-1; one run per seed in ``out/seed-K``, one
    after another, and the list of those run directories is returned instead of one path.  With ``resume``,
    each seed's run is resumed, a finished one skipped, and one never started is started from a sibling's
    ``config.yaml`` with its own seed.
    """
    if seeds is not None:
        if seed is not None:
            raise UsageError("--seeds and --seed exclude each other: give the seeds as --seeds 0,1,2 (or --seeds N "
                             "for seeds 0..N-1)")
        return _train_seeds(model, data, out, recipe, seed_list(seeds), settings=settings, device=device,
                            threads=threads, resume=resume, max_time=max_time, max_tokens=max_tokens,
                            init_train=init_train,
                            init_dev=init_dev, warm_start=warm_start, encoder_path=encoder_path, quiet=quiet,
                            force=force, **overrides)
    from depinduce.training.engine import TrainOptions
    from depinduce.training.engine import train as run_training

    items = list(settings)
    for key, value in overrides.items():
        items.extend(_setting(key, value))
    # recorded in config.yaml as absolute paths, so a run says what it read
    for key, path in (("train.init_train", init_train), ("train.init_dev", init_dev),
                      ("train.warm_start", warm_start), ("model_config.encoder_path", encoder_path)):
        if path is not None:
            checked = Path(path)
            wanted_dir = key in ("train.warm_start", "model_config.encoder_path")
            if not (checked.is_dir() if wanted_dir else checked.is_file()):
                raise NotFoundError(f"{path}: no such {'folder' if wanted_dir else 'file'}")
            items.append(f"{key}={checked.resolve()}")
    result = run_training(TrainOptions(
        data_dir=_path(data), run_dir=_path(out), model=model, recipe=_path(recipe), overrides=tuple(items),
        device=device, threads=threads, seed=seed, resume=resume, max_time=max_time,
        max_tokens=parse_token_count(max_tokens), quiet=quiet, force=force,
    ))
    return result.run_dir


_SCALE = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}


def parse_token_count(value: int | str | None) -> int | None:
    """``--max-tokens``: an integer, or a number with a k/M/G suffix (``2.5M`` = 2,500,000)."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        if isinstance(value, int) and value < 1:
            raise UsageError(f"--max-tokens {value}: give a positive number of training tokens")
        return value
    text = str(value).strip().replace(",", "").replace("_", "")
    suffix = text[-1:].lower() if text[-1:].isalpha() else ""
    try:
        number = float(text[: len(text) - len(suffix)]) * _SCALE[suffix]
    except (ValueError, KeyError):
        number = float("nan")
    if not (number >= 1 and number == number and number != float("inf")):
        raise UsageError(f"--max-tokens {value!r}: give a positive number of training tokens (2500000, 2.5M, 500k)")
    return int(round(number))


def seed_list(seeds: int | str | Sequence[int]) -> list[int]:
    """``--seeds``: ``"0,1,2,3"`` or a list are those seeds, ``"4"`` or 4 the seeds 0..3; distinct, at least 0."""
    if isinstance(seeds, str):
        parts = [part.strip() for part in seeds.split(",")]
        if not all(part.lstrip("-").isdigit() for part in parts):
            raise UsageError(f"--seeds {seeds!r}: give comma-separated integers (0,1,2) or a count N")
        numbers = [int(part) for part in parts]
        seeds = numbers[0] if len(numbers) == 1 else numbers
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
    from depinduce.training import defaults
    from depinduce.training.config import load_recipe

    name = model or (load_recipe(defaults.recipe_path(recipe)).get("model") if recipe is not None else None)
    if name is None:
        raise UsageError("no model given: pass --model NAME or a recipe with a 'model' key")
    return defaults.fresh_run_dir(name)


def _ended_for_good(run_dir: Path) -> bool:
    """The run's last (re)start ended completed or stopped early: a resume has nothing left to do in it."""
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
        reason = manifest["runs"][-1]["outcome"]["reason"]
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return False
    return reason in _DONE


def _changes_settings(recipe: str | PathLike[str] | None, options: Mapping[str, Any]) -> bool:
    """Whether the call sets anything a run's config.yaml holds (which a resume may not change)."""
    paths = ("init_train", "init_dev", "warm_start", "encoder_path")
    return (recipe is not None or bool(options["settings"]) or any(options.get(key) is not None for key in paths)
            or bool(set(options) - _PASSED))


def _train_seeds(model: str | None, data: str | PathLike[str] | None, out: str | PathLike[str] | None,
                 recipe: str | PathLike[str] | None, seeds: list[int], *, resume: bool, quiet: bool,
                 **options: Any) -> list[Path]:
    """One run per seed in ``OUT/seed-K``, each through :func:`train` exactly as a one-seed call makes it."""
    import click

    if resume and _changes_settings(recipe, options):
        raise UsageError("--resume continues each run with its own config.yaml; --recipe, --set and recipe "
                         "values cannot change it")
    parent = _parent_dir(model, recipe, out, resume)
    say = (lambda line: None) if quiet else (lambda line: click.echo(line, err=True))
    runs = [parent / SEED_DIR.format(seed=seed) for seed in seeds]
    sibling = next((run / "config.yaml" for run in runs if (run / "config.yaml").is_file()), None)
    if resume and sibling is None:
        raise RunDirectoryError(f"{parent}: holds none of the runs {', '.join(r.name for r in runs)}; nothing to "
                                "resume (start them without --resume)")
    done: list[Path] = []
    for number, (seed, run) in enumerate(zip(seeds, runs), start=1):
        say(f"seed {seed} ({number} of {len(seeds)}): {run}")
        if resume and _ended_for_good(run):
            say(f"{run}: already finished; skipped")
        elif resume and (run / "config.yaml").is_file():
            train(model, data, run, None, device=options["device"], threads=options["threads"], resume=True,
                  max_time=options["max_time"], max_tokens=options["max_tokens"], quiet=quiet)
        elif resume:  # never started: the same settings as its siblings, its own seed
            train(model, data, run, sibling, device=options["device"], threads=options["threads"], seed=seed,
                  max_time=options["max_time"], max_tokens=options["max_tokens"], quiet=quiet)
        else:
            train(model, data, run, recipe, seed=seed, quiet=quiet, **options)
        done.append(run)
    return done
