"""The run directory: everything ``parse`` and ``--resume`` need, and a record of how it was made.

::

    RUN_DIR/
      config.yaml    resolved recipe + overrides: model, model_config, train (itself a valid --recipe)
      vocab.json     copied from DATA_DIR
      model.pt       the best state dict so far (by train.select)
      last.pt        the full training state of the latest checkpoint (for --resume)
      metrics.jsonl  one JSON object per evaluation
      manifest.json  versions, data checksums, seed, and each (re)start's command line and outcome

Only rank 0 writes here; every write is atomic (see :mod:`depinduce.training.checkpoint`).
"""

from __future__ import annotations

import json
import math
import platform
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import depinduce
from depinduce.checksum import sha256_file
from depinduce.errors import ResourceError, RunDirectoryError, UsageError
from depinduce.locking import absolute
from depinduce.training.checkpoint import atomic_write_text

RUN_FILES = ("config.yaml", "vocab.json", "tags.json", "model.pt", "last.pt", "metrics.jsonl", "manifest.json")
MANIFEST_FORMAT = "depinduce-run"
# The DATA_DIR files a run reads (when present); their checksums tie the run to its data.
DATA_FILES = ("train.txt", "vocab.json", "dev.txt", "dev.conllu", "dev.trees", "train.conllu")


def check_run_dir(run_dir: Path, *, force: bool, resume: bool, data_dir: Path | None = None) -> None:
    """Refuse to clobber a run by accident; ``--resume`` needs a run to continue; ``--force`` replaces a run,
    never a folder that is not one, and never the data."""
    if force and resume:
        raise UsageError("--force starts over and --resume continues; choose one")
    if data_dir is not None:
        run, data = absolute(run_dir), absolute(data_dir)
        if run == data or data in run.parents or run in data.parents:
            raise UsageError(f"--out {run_dir} and --data {data_dir} overlap; a run directory must be a folder "
                             "of its own, apart from the data")
    if resume:
        if not (run_dir / "config.yaml").is_file():
            raise RunDirectoryError(f"{run_dir}: not a run directory (no config.yaml); nothing to resume")
        last = run_dir / "last.pt"
        if last.exists() and not last.is_file():
            raise RunDirectoryError(f"{last}: is not a file; the run's checkpoint must be a file")
        if not last.is_file():
            raise RunDirectoryError(f"{run_dir}: no last.pt; the run never reached its first checkpoint — "
                                    "start over with --force")
        return
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirectoryError(f"{run_dir} exists and is not a folder; choose another --out")
    if run_dir.is_dir() and any(run_dir.iterdir()):
        if not force:
            raise RunDirectoryError(f"{run_dir} already exists; use --resume to continue it or --force to start over")
        if not (run_dir / "config.yaml").is_file():
            raise RunDirectoryError(f"{run_dir}: not a run directory (no config.yaml); --force replaces runs only, "
                                    "so choose another --out")


def clear_run_files(run_dir: Path) -> None:
    """``--force``: remove a previous run's files (and temporary leftovers); nothing else in the folder."""
    for name in RUN_FILES:
        (run_dir / name).unlink(missing_ok=True)
    for leftover in run_dir.glob(".*.tmp"):
        leftover.unlink(missing_ok=True)


def recorded_data_dir(run_dir: Path) -> Path | None:
    """The data folder a run was started on (its manifest's ``data.dir``), if the manifest says and it still
    exists: what ``--resume`` reads when no ``--data`` is given."""
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
        folder = Path(manifest["data"]["dir"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return folder if folder.is_dir() else None


def data_checksums(data_dir: Path) -> dict[str, dict[str, Any]]:
    """sha256 and size of each DATA_DIR file the run reads."""
    out = {}
    for name in DATA_FILES:
        path = data_dir / name
        if path.is_file():
            out[name] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    return out


def _finite(value: Any) -> Any:
    """JSON has no NaN/Infinity: non-finite floats become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass
class RunDir:
    """Paths and writers of one run directory."""

    path: Path

    @property
    def config(self) -> Path:
        return self.path / "config.yaml"

    @property
    def vocab(self) -> Path:
        return self.path / "vocab.json"

    @property
    def tags(self) -> Path:
        return self.path / "tags.json"

    @property
    def model(self) -> Path:
        return self.path / "model.pt"

    @property
    def last(self) -> Path:
        return self.path / "last.pt"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def manifest(self) -> Path:
        return self.path / "manifest.json"

    # ---------------------------------------------------------------------------------------- starting

    def create(self, config_yaml: str, data_dir: Path, *, vocab_json: str | None = None,
               tags_json: str | None = None) -> None:
        """Lay out a fresh run: the config, the vocabulary the model indexes (the data folder's unless the run
        built its own, as supervised runs do over every token) and, for tag-reading models, ``tags.json``."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            reason = "a file is in the way" if isinstance(exc, (FileExistsError, NotADirectoryError)) else exc.strerror
            raise ResourceError(f"{self.path}: cannot create the run directory ({reason or exc})") from None
        atomic_write_text(self.config, config_yaml)
        atomic_write_text(self.vocab, vocab_json if vocab_json is not None
                          else (data_dir / "vocab.json").read_text(encoding="utf-8"))
        if tags_json is not None:
            atomic_write_text(self.tags, tags_json)
        self.metrics.touch()

    def start_manifest(self, *, model: str, seed: int, data_dir: Path, command: list[str], device: str,
                       world_size: int, threads: int, resumed_from_step: int | None) -> None:
        """Write (or, on resume, extend) ``manifest.json``; a resume on changed data is refused."""
        checksums = data_checksums(data_dir)
        entry = {
            "command": command,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "resumed_from_step": resumed_from_step,
            "device": device,
            "world_size": world_size,
            "threads": threads,
            "host": platform.node(),
        }
        if resumed_from_step is not None:
            manifest = self.read_manifest()
            self.check_resume_data(data_dir, checksums)
            manifest.setdefault("runs", []).append(entry)
        else:
            data_manifest = data_dir / "manifest.json"
            source = None
            if data_manifest.is_file():
                try:
                    described = json.loads(data_manifest.read_text(encoding="utf-8"))
                    source = {"command": described.get("command"), "source": described.get("source"),
                              "manifest_sha256": sha256_file(data_manifest)}
                except (OSError, ValueError):
                    source = None
            manifest = {
                "format": MANIFEST_FORMAT,
                "model": model,
                "seed": seed,
                "versions": {
                    "depinduce": depinduce.__version__,
                    "python": platform.python_version(),
                    "torch": torch.__version__,
                    "platform": platform.platform(),
                },
                "data": {"dir": str(data_dir.resolve()), "files": checksums, "preprocess": source},
                # what --resume checks: the run continues with these settings, so an edited config.yaml is refused
                "config_sha256": sha256_file(self.config),
                "runs": [entry],
            }
        self.write_manifest(manifest)

    def check_resume_data(self, data_dir: Path, checksums: Mapping[str, Any] | None = None) -> None:
        """Refuse to resume on data other than the run's: a recorded file that changed or disappeared."""
        if checksums is None:
            checksums = data_checksums(data_dir)
        recorded = self.read_manifest().get("data", {}).get("files", {})
        # Only the files the run recorded: one it did not record is one its version never read (runs made
        # before the supervised path did not checksum train.conllu) — refusing those would strand the run.
        changed = sorted(name for name in recorded
                         if recorded[name].get("sha256") != checksums.get(name, {}).get("sha256"))
        if changed:
            raise RunDirectoryError(
                f"{data_dir}: {', '.join(changed)} changed since this run started, or is not the run's data "
                f"folder (checksums differ from {self.manifest}); refusing to resume on different data"
            )

    def check_resume_config(self) -> None:
        """``--resume`` continues with the settings the run started with; an edit of ``config.yaml`` (which
        would say otherwise) is refused, not silently ignored.  Runs made before the checksum existed pass."""
        expected = self.read_manifest().get("config_sha256")
        if expected is not None and self.config.is_file() and sha256_file(self.config) != expected:
            raise RunDirectoryError(
                f"{self.config}: edited since the run started; --resume continues with the settings the run "
                f"started with, so undo the edit — or start a new run with those settings: "
                f"--recipe {self.config} --out NEW_DIR")

    def read_manifest(self) -> dict[str, Any]:
        try:
            data = json.loads(self.manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise RunDirectoryError(f"{self.manifest}: unreadable run manifest ({exc.__class__.__name__})") from exc
        if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
            raise RunDirectoryError(f"{self.manifest}: not a depinduce run manifest")
        return data

    def write_manifest(self, manifest: Mapping[str, Any]) -> None:
        atomic_write_text(self.manifest, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")

    def finish_manifest(self, outcome: Mapping[str, Any]) -> None:
        """Record how this (re)start ended in its ``runs`` entry."""
        manifest = self.read_manifest()
        manifest["runs"][-1]["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        manifest["runs"][-1]["outcome"] = {k: _finite(v) for k, v in outcome.items()}
        self.write_manifest(manifest)

    # ----------------------------------------------------------------------------------------- metrics

    def append_metrics(self, record: Mapping[str, Any]) -> None:
        line = json.dumps({k: _finite(v) for k, v in record.items()}, ensure_ascii=False)
        with self.metrics.open("a", encoding="utf-8") as stream:
            stream.write(line + "\n")
            stream.flush()

    def read_metrics(self) -> list[dict[str, Any]]:
        if not self.metrics.is_file():
            return []
        records = []
        for number, line in enumerate(self.metrics.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except ValueError:
                # a line cut short by a kill mid-write: everything after it is dropped on resume too
                break
        return records

    def trim_metrics(self, max_step: int) -> None:
        """On resume: drop evaluations made after the checkpoint being resumed (they will be redone)."""
        kept = [r for r in self.read_metrics() if int(r.get("step", 0)) <= max_step]
        atomic_write_text(self.metrics, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept))


def command_line(argv: Iterable[str] | None = None) -> list[str]:
    """The command as typed (argv[0] reduced to its name), for the manifest."""
    args = list(sys.argv if argv is None else argv)
    if args:
        args[0] = Path(args[0]).name
    return args

