"""Finding the runs a report covers: run directories, or folders holding them (``train --seeds`` parents).

A folder is read the same whichever way its runs were made: ``train --seeds 0,1`` in one process or one
``train --seed K --out DIR/seed-K`` per scheduler task leave the same ``seed-K`` run directories, and nothing
else in the parent is read.  A run counts once its manifest records a finished (re)start and ``model.pt``
exists; one still training, or killed before it finished, is skipped with a warning.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from depinduce.data.run_files import read_manifest, read_metrics, read_run_config
from depinduce.display import shell_command
from depinduce.errors import DepinduceError, NotFoundError, RunDirectoryError
from depinduce.io.filenames import CONFIG_FILE, MANIFEST_FILE, METRICS_FILE, MODEL_FILE

Warn = Callable[[str], None]


def shown_path(path: str | os.PathLike[str]) -> str:
    """``path`` as a report prints it: relative to the current folder (``data/ptb/test.trees``,
    ``../runs/seed-0``), so a table or note neither runs off a LaTeX page nor shows where the author's home
    is; absolute only where no relative path exists (another drive)."""
    try:
        return os.path.relpath(os.path.abspath(path))
    except ValueError:
        return str(path)


@dataclass
class Run:
    """One finished run directory, as a report reads it."""

    path: Path
    model: str
    seed: int | None
    config: dict[str, Any]  # config.yaml: the resolved recipe
    manifest: dict[str, Any]
    metrics: list[dict[str, Any]] = field(default_factory=list)  # metrics.jsonl, one record per evaluation

    @property
    def data_dir(self) -> Path | None:
        """The data folder the run was trained on (recorded in its manifest)."""
        recorded = self.manifest.get("data", {}).get("dir")
        return Path(recorded) if recorded else None

    @property
    def decoder(self) -> str:
        """The decoder ``parse`` uses for this run when given none: its ``train.decoder``."""
        return str(self.config.get("train", {}).get("decoder") or "mst")

    def recipe_without_seed(self) -> dict[str, Any]:
        """The resolved recipe with ``train.seed`` removed: what runs of one configuration share."""
        recipe = json.loads(json.dumps(self.config, default=str))
        recipe.get("train", {}).pop("seed", None)
        return recipe

    def configuration_key(self) -> str:
        """Runs with equal keys are seeds of one configuration: the same model and recipe (seed aside), trained
        on the same data (the data files' checksums from the manifest)."""
        data = self.manifest.get("data", {}).get("files", {})
        return json.dumps({"recipe": self.recipe_without_seed(), "data": data}, sort_keys=True)


def _natural(path: Path) -> tuple[Any, ...]:
    """``seed-2`` before ``seed-10``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name))


def _is_run_dir(path: Path) -> bool:
    return path.is_dir() and (path / CONFIG_FILE).is_file()


def run_dirs(paths: Iterable[Path]) -> list[Path]:
    """Each path that is a run directory, and the run directories directly inside each one that is not."""
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise NotFoundError(f"{path}: no such folder")
        if not path.is_dir():
            raise RunDirectoryError(f"{path}: not a folder; give run directories or folders holding them")
        if _is_run_dir(path):
            found.append(path)
            continue
        children = sorted((child for child in path.iterdir() if not child.name.startswith(".") and _is_run_dir(child)),
                          key=_natural)
        if not children:
            raise RunDirectoryError(f"{path}: not a run directory (no config.yaml) and holds no run directories "
                                    "(e.g. the seed-K folders of `train --seeds`)")
        found.extend(children)
    unique: dict[Path, Path] = {}
    for path in found:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


def read_run(path: Path) -> Run | str:
    """The run in ``path``, or why it cannot be reported (one line naming the file, and the field when a value
    has the wrong type)."""
    try:  # bounded, no aliases, checked: a hostile or edited file cannot take report down
        config = read_run_config(path / CONFIG_FILE)
    except DepinduceError as exc:
        return str(exc)
    if not (path / MANIFEST_FILE).exists():
        return f"{path}: no manifest.json; the run never started"
    try:
        manifest = read_manifest(path / MANIFEST_FILE)
        metrics = read_metrics(path / METRICS_FILE)
    except DepinduceError as exc:
        return str(exc)
    starts = manifest["runs"] or [{}]
    if "finished" not in starts[-1]:
        return (f"{path}: not finished (still training, or killed; "
                f"`{shell_command('depinduce', 'train', '--resume', '--out', path)}` continues it)")
    if not (path / MODEL_FILE).is_file():
        return f"{path}: no model.pt"
    seed = (config.get("train") or {}).get("seed")
    return Run(path=path, model=config["model"], seed=seed if isinstance(seed, int) else None, config=config,
               manifest=manifest, metrics=metrics)


def drop_repeats(runs: list[Run], warn: Warn) -> list[Run]:
    """One run per (configuration, seed): the same seed of the same configuration found again (a copy, or a
    folder given twice under other names) would count one result twice, so it is left out with a warning."""
    first: dict[tuple[str, int | None], Run] = {}
    kept = []
    for run in runs:
        key = (run.configuration_key(), run.seed)
        if run.seed is not None and key in first:
            warn(f"warning: {run.path} is seed {run.seed} of the same configuration as {first[key].path}; "
                 "counted once")
            continue
        first.setdefault(key, run)
        kept.append(run)
    return kept


def collect_runs(paths: Iterable[Path], warn: Warn) -> list[Run]:
    """The finished runs under ``paths`` (see :func:`run_dirs`); others are skipped with a warning, and none
    left is an error."""
    runs: list[Run] = []
    for path in run_dirs(paths):
        run = read_run(path)
        if isinstance(run, str):
            warn(f"warning: skipped {run}")
        else:
            runs.append(run)
    if not runs:
        raise RunDirectoryError("no finished run to report (see the warnings above)")
    return drop_repeats(runs, warn)
