"""``depinduce.train(...)``: ``depinduce train`` from Python.

``depinduce train`` calls :func:`train` itself, so a recipe, its overrides and every default are resolved by the
same code whichever way a run is started.  Recipe values are given as keyword arguments (``lr=1e-3``, or
``model_config={"n_layers": 4}`` for a nested one) instead of ``--set KEY=VALUE`` strings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

from depinduce.errors import DepinduceError


def _setting(key: str, value: Any) -> list[str]:
    """A keyword override as the ``--set`` strings the recipe resolver reads (a mapping: one per nested key)."""
    if isinstance(value, Mapping):
        if key not in ("train", "model_config"):
            raise DepinduceError(f"{key}: only 'train' and 'model_config' take a mapping of recipe values")
        return [item for name, inner in value.items() for item in _setting(f"{key}.{name}", inner)]
    # strings stay raw (a string field keeps the text); anything else as JSON, which YAML reads back unchanged
    return [f"{key}={value if isinstance(value, str) else json.dumps(value)}"]


def _path(value: str | PathLike[str] | None) -> Path | None:
    return None if value is None else Path(value)


def train(model: str | None = None, data: str | PathLike[str] | None = None, out: str | PathLike[str] | None = None,
          recipe: str | PathLike[str] | None = None, *, settings: Sequence[str] = (), device: str = "auto",
          threads: int | None = None, seed: int | None = None, resume: bool = False, max_time: float | None = None,
          init_train: str | PathLike[str] | None = None, init_dev: str | PathLike[str] | None = None,
          warm_start: str | PathLike[str] | None = None, encoder_path: str | PathLike[str] | None = None,
          quiet: bool = False, force: bool = False, **overrides: Any) -> Path:
    """Train (or resume) a neural backend on a ``depinduce preprocess`` data folder; returns the run directory.

    The arguments are ``depinduce train``'s options (``data`` is ``--data``, ``out`` is ``--out``, ``settings``
    are ``--set`` strings); ``**overrides`` are further recipe values.  Progress and summaries go to stderr
    (none with ``quiet``), never stdout; every problem is a :class:`DepinduceError`.
    """
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
                raise DepinduceError(f"{path}: no such {'folder' if wanted_dir else 'file'}")
            items.append(f"{key}={checked.resolve()}")
    result = run_training(TrainOptions(
        data_dir=_path(data), run_dir=_path(out), model=model, recipe=_path(recipe), overrides=tuple(items),
        device=device, threads=threads, seed=seed, resume=resume, max_time=max_time, quiet=quiet, force=force,
    ))
    return result.run_dir
