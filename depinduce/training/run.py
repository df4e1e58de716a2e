"""The run directory: everything ``parse`` and ``--resume`` need, and a record of how it was made.

::

    RUN_DIR/
      config.yaml    resolved recipe + overrides: model, model_config, train (itself a valid --recipe)
      vocab.json     copied from DATA_DIR
      model.pt       the best state dict so far (by train.select)
      last.pt        the full training state of the latest checkpoint (for --resume)
      metrics.jsonl  one JSON object per evaluation
      manifest.json  versions, data checksums, seed, each (re)start's command line and outcome (how it ended), and
                     right-branching's scores on the run's dev data (``baselines``), the bar its model must clear

Only rank 0 writes here; every write is atomic (see :mod:`depinduce.training.checkpoint`).
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from depinduce.display import json_text
from depinduce.checksum import sha256_file
from depinduce.data.files import VOCAB_MAX_BYTES, read_text_file, try_read_json
from depinduce.data.run_files import read_manifest as read_run_manifest, read_metrics as read_run_metrics
from depinduce.errors import DepinduceError, ResourceError, RunDirectoryError, UsageError
from depinduce.io.filenames import (CONFIG_FILE, DATA_FILES, LAST_FILE, MANIFEST_FILE, METRICS_FILE, MODEL_FILE,
                                    RUN_FILES, TAGS_FILE, TENSORBOARD_DIR, VOCAB_FILE)
from depinduce.locking import absolute
from depinduce.io.outputs import (RUN_FORMAT, append_file, check_replaceable_folder, folder_kind, kept_file,
                                  write_failure)
from depinduce.training.checkpoint import atomic_write_text
from depinduce.version import __version__


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
        check_resumable(run_dir)
        return
    # a run is recognised by its manifest, never by a file name: a folder of the user's is refused even with --force
    advice = "use --resume to continue it or --force to start over" if _resumable(run_dir) else \
        "it has no checkpoint to resume from (no last.pt); use --force to start over"
    check_replaceable_folder(run_dir, force, "run", advice)


def check_resumable(run_dir: Path) -> None:
    """``--resume`` needs a run with a checkpoint; the refusal says what the folder is and what may be done."""
    if not run_dir.exists():
        raise RunDirectoryError(f"{run_dir}: no such run; nothing to resume (start it without --resume)")
    if not (run_dir / CONFIG_FILE).is_file():
        raise RunDirectoryError(f"{run_dir}: not a run directory (no config.yaml); nothing to resume")
    last = run_dir / LAST_FILE
    if last.exists() and not last.is_file():
        raise RunDirectoryError(f"{last}: is not a file; the run's checkpoint must be a file")
    for name in RUN_FILES:  # before any work: a link out of the run is refused now, not at the first write
        kept_file(run_dir / name)
    if not last.is_file():
        start_over = "start over with --force" if folder_kind(run_dir) == "run" else \
            "move the folder away and start the run again"
        raise RunDirectoryError(f"{run_dir}: no last.pt; the run never reached its first checkpoint — {start_over}")


def _resumable(run_dir: Path) -> bool:
    return (run_dir / CONFIG_FILE).is_file() and (run_dir / LAST_FILE).is_file()


def clear_run_files(run_dir: Path) -> None:
    """``--force``: remove a previous run's files (and temporary leftovers); nothing else in the folder."""
    for name in RUN_FILES:
        (run_dir / name).unlink(missing_ok=True)
    for leftover in run_dir.glob(".*.tmp"):
        leftover.unlink(missing_ok=True)
    if not (run_dir / TENSORBOARD_DIR).is_symlink():  # a link's files are not the run's to delete
        for events in run_dir.glob(f"{TENSORBOARD_DIR}/events.out.tfevents.*"):  # train.tensorboard's, old run
            events.unlink(missing_ok=True)


def _stamps(folder: Path) -> dict[str, tuple[int, int]]:
    """Each entry of ``folder`` (none when it is no folder) by name: its inode and change time, which a file
    written anew never keeps."""
    try:
        with os.scandir(folder) as entries:
            return {entry.name: (stat.st_ino, stat.st_ctime_ns)
                    for entry in entries for stat in [entry.stat(follow_symlinks=False)]}
    except OSError:
        return {}


class FreshStart:
    """What a new (not resumed) run's start creates, so that a start failing before the first training step (a
    missing extra, a bad setting found late, an error in the first step) can take it back: a folder left behind
    would refuse the same command next time ("already exists; use --force") yet hold nothing to resume.

    Only what this start made is taken back: the run's own files (:data:`RUN_FILES`, temporary leftovers and
    TensorBoard events) that were not there before or were written anew since (another inode or change time), then
    the folders it created (the run folder, missing parents) when they are empty.  A file of the user's is never
    touched, nor a run file this start did not write, nor anything through a link."""

    def __init__(self, run_dir: Path) -> None:
        self.path = absolute(run_dir)
        # innermost first; a dangling link is no missing folder of ours
        self.made_folders = [p for p in (self.path, *self.path.parents) if not os.path.lexists(p)]
        self.before = _stamps(self.path)
        self.board_before = _stamps(self.path / TENSORBOARD_DIR)
        self.locked = False  # set once this start holds the run's lock: until then the folder may be another's

    def _written(self, path: Path, before: dict[str, tuple[int, int]]) -> bool:
        """``path`` is a file (no link) this start wrote."""
        try:
            stat = path.lstat()
        except OSError:
            return False
        return path.is_file() and not path.is_symlink() and before.get(path.name) != (stat.st_ino,
                                                                                        stat.st_ctime_ns)

    def take_back_files(self) -> None:
        """Remove the run files this start wrote (called while the run's lock is still held)."""
        if not self.locked or self.path.is_symlink() or not self.path.is_dir():
            return
        candidates = [self.path / name for name in RUN_FILES] + list(self.path.glob(".*.tmp"))
        for path in candidates:
            if self._written(path, self.before):
                path.unlink(missing_ok=True)
        board = self.path / TENSORBOARD_DIR
        if board.is_dir() and not board.is_symlink():
            for events in board.glob("events.out.tfevents.*"):
                if self._written(events, self.board_before):
                    events.unlink(missing_ok=True)
            if TENSORBOARD_DIR not in self.before:
                _remove_empty(board)

    def take_back_folders(self) -> None:
        """Remove the folders this start created, innermost first, as far as they are empty (after the lock,
        whose file lies beside the run folder, is released)."""
        if not self.locked:  # another process holds the run: the folders may be its
            return
        for folder in self.made_folders:
            if not _remove_empty(folder):
                return


def _remove_empty(folder: Path) -> bool:
    """Remove ``folder`` if it is an empty folder; whether it is gone."""
    try:
        folder.rmdir()
    except OSError:
        return not os.path.lexists(folder)
    return True


@dataclass(frozen=True)
class RecordedSettings:
    """What a run was told beside its ``config.yaml``: its data folder, budgets and the ``--seeds`` it is one of
    (None: not given, or a run from before they were recorded).  ``--resume`` continues with these."""

    data_dir: Path
    max_tokens: int | None = None
    max_time: float | None = None
    seeds: list[int] | None = None


def recorded_settings(run_dir: Path) -> RecordedSettings | None:
    """The settings in ``run_dir``'s manifest; None when it has none (killed before its first checkpoint wrote
    one); a damaged manifest is a one-line :class:`RunDirectoryError`."""
    if not (run_dir / MANIFEST_FILE).exists():
        return None
    manifest = RunDir(run_dir).read_manifest()
    told = manifest.get("settings") or {}
    return RecordedSettings(Path(manifest["data"]["dir"]), told.get("max_tokens"), told.get("max_time"),
                            told.get("seeds"))


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
    # called with each record appended to metrics.jsonl (TensorBoard, when train.tensorboard is on)
    observers: list[Callable[[Mapping[str, Any]], None]] = field(default_factory=list, compare=False)

    @property
    def config(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def vocab(self) -> Path:
        return self.path / VOCAB_FILE

    @property
    def tags(self) -> Path:
        return self.path / TAGS_FILE

    @property
    def model(self) -> Path:
        return self.path / MODEL_FILE

    @property
    def last(self) -> Path:
        return self.path / LAST_FILE

    @property
    def metrics(self) -> Path:
        return self.path / METRICS_FILE

    @property
    def manifest(self) -> Path:
        return self.path / MANIFEST_FILE

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
        if not self.manifest.exists():  # first: a run killed at any later point is still known as depinduce's
            self.write_manifest({"format": RUN_FORMAT, "runs": []})
        atomic_write_text(self.config, config_yaml)
        atomic_write_text(self.vocab, vocab_json if vocab_json is not None
                          else read_text_file(data_dir / VOCAB_FILE, "vocabulary", VOCAB_MAX_BYTES))
        if tags_json is not None:
            atomic_write_text(self.tags, tags_json)
        self.metrics.touch()

    def start_manifest(self, *, model: str, seed: int, data_dir: Path, command: list[str], device: str,
                       world_size: int, threads: int, resumed_from_step: int | None,
                       settings: Mapping[str, Any]) -> None:
        """Write (or, on resume, extend) ``manifest.json``; a resume on changed data is refused.  ``settings``
        (:data:`~depinduce.data.run_files.SETTINGS`: the budgets in effect, the seeds) replace the recorded ones."""
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
            manifest["settings"] = dict(settings)
        else:
            data_manifest = data_dir / MANIFEST_FILE
            source = None
            described = try_read_json(data_manifest)
            if isinstance(described, dict):
                source = {"command": described.get("command"), "source": described.get("source"),
                          "manifest_sha256": sha256_file(data_manifest)}
            manifest = {
                "format": RUN_FORMAT,
                "model": model,
                "seed": seed,
                "versions": {
                    "depinduce": __version__,
                    "python": platform.python_version(),
                    "torch": torch.__version__,
                    "platform": platform.platform(),
                },
                "data": {"dir": str(data_dir.resolve()), "files": checksums, "preprocess": source},
                # what --resume checks: the run continues with these settings, so an edited config.yaml is refused
                "config_sha256": sha256_file(self.config),
                "settings": dict(settings),
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
            return read_run_manifest(self.manifest)
        except DepinduceError as exc:
            raise RunDirectoryError(f"unreadable run manifest: {exc}") from None

    def write_manifest(self, manifest: Mapping[str, Any]) -> None:
        atomic_write_text(self.manifest, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")

    def record_baselines(self, scores: Mapping[str, Mapping[str, Any]]) -> None:
        """Keep baselines' dev scores (``{"right-branching": {"dev_uda": …}}``) in the manifest."""
        manifest = self.read_manifest()
        manifest["baselines"] = {name: {k: _finite(v) for k, v in values.items()} for name, values in scores.items()}
        self.write_manifest(manifest)

    def finish_manifest(self, outcome: Mapping[str, Any]) -> None:
        """Record how this (re)start ended in its ``runs`` entry."""
        manifest = self.read_manifest()
        manifest["runs"][-1]["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        manifest["runs"][-1]["outcome"] = {k: _finite(v) for k, v in outcome.items()}
        self.write_manifest(manifest)

    # ----------------------------------------------------------------------------------------- metrics

    def append_metrics(self, record: Mapping[str, Any]) -> None:
        line = json_text({k: _finite(v) for k, v in record.items()})
        try:
            with append_file(self.metrics) as stream:  # never through a link out of the run folder
                stream.write(line + "\n")
                stream.flush()
        except OSError as exc:
            raise write_failure(self.metrics, exc) from None
        for observer in self.observers:  # e.g. TensorBoard (train.tensorboard)
            observer(record)

    def read_metrics(self) -> list[dict[str, Any]]:
        """The evaluations so far (a line cut short by a kill mid-write is dropped, and redone on resume)."""
        return read_run_metrics(self.metrics)

    def trim_metrics(self, max_step: int) -> None:
        """On resume: drop evaluations made after the checkpoint being resumed (they will be redone)."""
        kept = [r for r in self.read_metrics() if r["step"] <= max_step]
        atomic_write_text(self.metrics, "".join(json_text(r) + "\n" for r in kept))


def command_line(argv: Iterable[str] | None = None) -> list[str]:
    """The command as typed (argv[0] reduced to its name), for the manifest."""
    args = list(sys.argv if argv is None else argv)
    if args:
        args[0] = Path(args[0]).name
    return args

