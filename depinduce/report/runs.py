"""Finding the runs a report covers: run directories, or folders holding them (``train --seeds`` parents).

A folder is read the same whichever way its runs were made: ``train --seeds 0,1`` in one process or one
``train --seed K --out DIR/seed-K`` per scheduler task leave the same ``seed-K`` run directories, and nothing
else in the parent is read.  A run counts once its manifest records a finished (re)start and ``model.pt``
exists; one still training, or killed before it finished, is skipped with a warning.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from depinduce.errors import NotFoundError, RunDirectoryError

Warn = Callable[[str], None]


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
    return path.is_dir() and (path / "config.yaml").is_file()


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


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _metrics(path: Path) -> list[dict[str, Any]]:
    """metrics.jsonl's records (a line cut off by a kill is skipped: the report only plots them)."""
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, Mapping):
            records.append(dict(record))
    return records


def read_run(path: Path) -> Run | str:
    """The run in ``path``, or why it cannot be reported (one line)."""
    try:
        config = yaml.safe_load((path / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return f"{path / 'config.yaml'}: unreadable ({exc.__class__.__name__})"
    if not isinstance(config, dict) or not isinstance(config.get("model"), str):
        return f"{path / 'config.yaml'}: not a run's config (no 'model' key)"
    try:
        manifest = _read_json(path / "manifest.json")
    except (OSError, ValueError):
        return f"{path}: no readable manifest.json; the run never started"
    if not isinstance(manifest, dict) or manifest.get("format") != "depinduce-run":
        return f"{path / 'manifest.json'}: not a depinduce run manifest"
    starts = manifest.get("runs") or [{}]
    if not isinstance(starts[-1], dict) or "finished" not in starts[-1]:
        return f"{path}: not finished (still training, or killed; `train --resume --out {path}` continues it)"
    if not (path / "model.pt").is_file():
        return f"{path}: no model.pt"
    seed = config.get("train", {}).get("seed") if isinstance(config.get("train"), dict) else None
    return Run(path=path, model=config["model"], seed=seed if isinstance(seed, int) else None, config=config,
               manifest=manifest, metrics=_metrics(path / "metrics.jsonl"))


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
    return runs
