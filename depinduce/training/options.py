"""What a training invocation is asked (:class:`TrainOptions`) and how it ended (:class:`TrainResult`): plain
records every loop and the Python API share, kept apart from the loops so importing them costs nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class TrainOptions:
    """What ``depinduce train`` was asked to do (the CLI's options, as the library takes them).  The budgets come
    checked by :func:`depinduce.training.budgets.checked_budgets` (``depinduce.train`` does it)."""

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
