"""The files of a run directory as depinduce reads them back: one reader per kind, each checked against its schema
(:mod:`depinduce.data.schemas`), so an edited or damaged file is one line naming the file and the field wherever
it is read — ``train --resume``, ``parse``, ``models``, ``report`` — and never a traceback or a wrong number.

``config.yaml`` is checked here only as far as every reader needs it (``model``, and ``model_config`` and
``train`` being mappings); its values are checked against the backend's dataclasses by
:func:`depinduce.training.config.resolve_config` and :func:`depinduce.models.neural.build_config`.
"""

from __future__ import annotations

import json
from os import PathLike
from pathlib import Path
from typing import Any

from depinduce.data.files import METRICS_MAX_BYTES, load_yaml, read_json_file, read_text_file
from depinduce.data.schemas import NUMBER, MapOf, OneOf, Opt, Range, Record, validate
from depinduce.errors import InputError
from depinduce.io.outputs import RUN_FORMAT

PERCENT = Range(0.0, 100.0)

OUTCOME = {"reason": OneOf(("completed", "early_stop", "max_time", "max_tokens", "signal")), "step": Opt(int),
           "epochs_completed": Opt(int), "select": Opt(str), "best": Opt(NUMBER), "best_step": Opt(int),
           "signal": Opt(str)}
START = {"command": Opt([str]), "started": Opt(str), "resumed_from_step": Opt(int), "device": Opt(str),
         "world_size": Opt(int), "threads": Opt(int), "host": Opt(str), "finished": Opt(str),
         "outcome": Opt(OUTCOME)}
# what a run was told beside its config.yaml: --max-tokens, --max-time and the --seeds it is one of
SETTINGS = {"max_tokens": Opt(int), "max_time": Opt(NUMBER), "seeds": Opt([int])}
MANIFEST = {
    "format": OneOf((RUN_FORMAT,)),
    "model": str,
    "seed": Opt(int),
    "versions": Opt(MapOf(Opt(str))),
    "data": {"dir": str, "files": Opt(MapOf({"sha256": str, "bytes": Opt(int)})), "preprocess": Opt(dict)},
    "config_sha256": Opt(str),
    "settings": Opt(SETTINGS),
    "runs": [START],
    "baselines": Opt(MapOf(MapOf(Opt(NUMBER)))),
}
# one evaluation: its step, the selection, and numbers (null where a metric could not be measured)
METRIC_RECORD = Record({"step": int, "epoch": Opt(NUMBER), "select": Opt(str), "best": Opt(bool),
                        "curve": Opt(bool), "train_log": Opt(bool)}, rest=Opt(NUMBER))
RUN_CONFIG = {"model": str, "model_config": Opt(dict), "train": Opt(dict)}
CARD = {"name": str, "backend": str, "summary": str, "licence": str, "model_sha256": str, "decoder": Opt(str),
        "results": Opt([{"data": str, "model": MapOf(PERCENT), "right-branching": Opt(MapOf(PERCENT))}])}


def read_manifest(path: str | PathLike[str]) -> dict[str, Any]:
    """A run's ``manifest.json``, checked: a missing file, bad JSON or a field of the wrong type is an
    :class:`InputError` naming the file (and the field)."""
    data = read_json_file(path, "run manifest")
    if not isinstance(data, dict) or data.get("format") != RUN_FORMAT:
        raise InputError(path, None, f"not a depinduce run manifest (no \"format\": \"{RUN_FORMAT}\")")
    return validate(data, MANIFEST, path)


def read_metrics(path: str | PathLike[str]) -> list[dict[str, Any]]:
    """A run's ``metrics.jsonl`` records, checked; a last line cut short by a kill mid-write is dropped (the
    engine redoes it on resume), and any other bad line is an :class:`InputError` naming its line."""
    if not Path(path).is_file():
        return []
    lines = read_text_file(path, "metrics file", METRICS_MAX_BYTES).splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if all(not rest.strip() for rest in lines[number:]):
                break  # the line a kill cut short
            raise InputError(path, number, "not valid JSON") from None
        records.append(validate(record, METRIC_RECORD, path, number))
    return records


def read_run_config(path: str | PathLike[str]) -> dict[str, Any]:
    """A run's ``config.yaml``: a mapping naming the backend (``model``) with ``model_config`` and ``train``
    mappings; their values are the backend's to check."""
    data = load_yaml(read_text_file(path, "run configuration"), path)
    if not isinstance(data, dict):
        raise InputError(path, None, "not a run configuration (a mapping with model, model_config, train)")
    return validate(data, RUN_CONFIG, path)


def read_card(path: str | PathLike[str]) -> dict[str, Any]:
    """The bundled model's ``card.json``, checked."""
    return validate(read_json_file(path, "model card"), CARD, path)
