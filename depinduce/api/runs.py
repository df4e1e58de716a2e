"""``depinduce.api.list_runs()``: the training runs under ``./runs`` as ``depinduce models`` lists them — how each
ended, its selected dev score beside right-branching's — and the one ``parse`` takes without ``--model``."""

from __future__ import annotations

from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

from depinduce.api.words import python_words
from depinduce.errors import DepinduceError
from depinduce.models.bundled import RUNS_DIR, newest_finished_run
from depinduce.training.outcome import RunOutcome, run_outcome


@dataclass(frozen=True)
class RunListing:
    """The runs directly under one folder, by name, and ``parse``'s default among them (None: the bundled model)."""

    root: Path
    runs: list[RunOutcome]
    parse_default: Path | None
    skipped: list[str] = field(default_factory=list)  # "warning: skipped RUN: FILE: field …", one per damaged run


@python_words
def list_runs(root: str | PathLike[str] = RUNS_DIR, *, measure: bool = False) -> RunListing:
    """Every training run directly under ``root`` (a folder with a run manifest).  ``measure``: measure
    right-branching's dev scores for runs that did not record them (seconds per run); by default such a run
    shows none."""
    folder = Path(root)
    found = sorted(path for path in folder.iterdir() if path.is_dir()) if folder.is_dir() else []
    runs, skipped = [], []
    for path in found:
        try:
            outcome = run_outcome(path, measure=measure)
        except DepinduceError as exc:  # one damaged run is skipped with a line, the others are listed
            skipped.append(f"warning: skipped {path}: {exc}")
            continue
        if outcome is not None:
            runs.append(outcome)
    return RunListing(folder, runs, newest_finished_run(folder), skipped)
