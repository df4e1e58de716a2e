"""The record a run keeps of its training beside its models: ``train.log`` and TensorBoard events.

``train.log`` holds every status line the run printed (and the ``train.log_every`` training-loss lines), each
with its time, appended across resumes; the progress bar is drawn on the terminal only, so the file has none of
its fragments.  TensorBoard events (``train.tensorboard: true``, the ``tensorboard`` extra) carry every number
``metrics.jsonl`` records at the record's step: an evaluation's under ``train/…``, ``dev/…`` and ``run/…``, a
``train.log_every`` record's under ``log/…`` and a learning-curve point's under ``curve/…``, so each tag has one
value per step (a ``log_every`` step can also be an evaluation's, and the two average different windows).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from depinduce.display import printable_lines
from depinduce.errors import ResourceError
from depinduce.io.outputs import append_file, kept_folder, write_failure

Log = Callable[[str], None]


class TrainLog:
    """A log function that shows each line through ``echo`` and appends it, time-stamped, to ``train.log``.

    Lines said before the run directory is ready (the recipe chosen, a data note) are kept and written first
    once :meth:`open` names the file, so the file starts where the terminal does."""

    def __init__(self, echo: Log, *, keep: bool = True) -> None:
        self.echo = echo
        self.keep = keep  # False on the ranks other than the first: one writer per run directory
        self.pending: list[str] = []
        self.stream: TextIO | None = None
        self.path: Path | None = None

    def __call__(self, message: str) -> None:
        self.echo(printable_lines(message))  # a run folder's or a token's control characters, escaped
        self.file_only(message)

    def file_only(self, message: str) -> None:
        """A line for the file alone (the terminal shows the same in the progress bar)."""
        if not self.keep:
            return
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        lines = [f"{stamp} {line}\n" for line in str(message).splitlines() or [""]]
        if self.stream is None:
            self.pending.extend(lines)
            return
        self._write("".join(lines))

    def open(self, path: Path) -> None:
        """Start appending to ``path`` (a resumed run's log continues), the lines so far first."""
        if not self.keep:
            return
        self.path = path
        self.stream = append_file(path)  # never through a link out of the run folder
        pending, self.pending = self.pending, []
        self._write("".join(pending))

    def _write(self, text: str) -> None:
        assert self.stream is not None and self.path is not None
        try:
            self.stream.write(text)
            self.stream.flush()
        except OSError as exc:
            raise write_failure(self.path, exc) from None

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
            self.stream = None


def _tag(key: str) -> str:
    """``train_loss`` → ``train/loss``, ``dev_uda`` → ``dev/uda``, ``lr`` → ``run/lr``."""
    family, _, rest = key.partition("_")
    return f"{family}/{rest}" if family in ("train", "dev") and rest else f"run/{key}"


def _family(record: Mapping[str, Any]) -> str:
    """The tag prefix of a record's kind: ``log/`` for a ``train.log_every`` record (its loss averages the last N
    steps, an evaluation's the steps since the previous evaluation), ``curve/`` for a learning-curve point."""
    return "curve/" if record.get("curve") else "log/" if record.get("train_log") else ""


class TensorBoard:
    """Every number of every ``metrics.jsonl`` record as a TensorBoard scalar at the record's step, one value per
    tag and step (:func:`_family`).  ``purge_step``: a resume's first step, so the steps a killed run logged after
    its checkpoint (trained again now) are hidden rather than shown twice."""

    def __init__(self, directory: Path, *, purge_step: int | None = None) -> None:
        kept_folder(directory)  # first: a link out of the run or a read-only folder is one line, not a traceback
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ResourceError("train.tensorboard: true needs the tensorboard package: "
                                "pip install 'depinduce[tensorboard]' (or set train.tensorboard: false)") from None
        self.writer = SummaryWriter(log_dir=str(directory), purge_step=purge_step)

    def __call__(self, record: Mapping[str, Any]) -> None:
        step = record.get("step")
        if not isinstance(step, int):
            return
        prefix = _family(record)
        for key, value in record.items():
            if key in ("step", "best") or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            self.writer.add_scalar(prefix + _tag(key), value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
