"""``train --seeds … --jobs K``: K seeds at once, each a ``depinduce train --seed S --out OUT/seed-S`` process.

Each seed is the very command a one-seed run is, so its run is the one ``train --seed S`` makes alone (bit for bit
on CPU with the same ``--threads``).  Processes rather than threads or ranks: seeds share nothing, a failing seed
cannot take the others down, and the OS divides the cores (CPU: ``--threads``, else cores/K each), the one GPU
(shared) or the GPUs (one seed per device, round robin).

Each child writes its stderr to a pipe, so it prints its progress as plain lines (a :class:`ProgressLine` every
second, ``DEPINDUCE_PROGRESS_EVERY``) rather than a bar redrawn in place, whose fragments a pipe would keep; this
process reads them all, parses those lines (:meth:`ProgressLine.parse`, the format's one reader) into one status
line for every running seed (with their tokens/s added up), prints the children's other lines prefixed
``seed S:``, and forwards Ctrl-C / SIGTERM to each child once per signal received (the children run in sessions of
their own, so a terminal's Ctrl-C reaches them only through here): the first stops every seed cleanly
(checkpointed) and starts no new one, a second interrupts them, a third kills them.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from depinduce.display import printable, say, shell_command
from depinduce.errors import DepinduceError, RecipeError, ResourceError
from depinduce.io.filenames import CONFIG_FILE, MANIFEST_FILE, METRICS_FILE
from depinduce.training.budget_bar import PROGRESS_EVERY, ProgressLine
from depinduce.training.signals import stop_signals_handled
from depinduce.data.run_files import read_manifest, read_metrics

Pathish = str | PathLike[str] | None
STOP_EXIT_CODES = {"SIGINT": 130, "SIGTERM": 143}  # 128 + the signal's number, as a shell reports a kill
SEED_FOLDER = "seed-{seed}"  # a multi-seed run's per-seed folder under OUT


class SeedRuns(list):  # list[Path]
    """The seeds' run directories, in order, and ``stop``: the signal (``"SIGTERM"``) that stopped the call, when
    one did — also when no seed got far enough to record it, so the exit code never says a stopped call ended."""

    stop: str | None = None


@dataclass(frozen=True)
class TrainCall:
    """What one training call was given (:func:`depinduce.api.train`'s arguments; None or empty: not passed):
    what a seed's run is started with, in this process or as a ``depinduce train`` command of its own."""

    model: str | None = None
    data: Pathish = None
    out: Pathish = None
    recipe: Pathish = None
    settings: tuple[str, ...] = ()  # --set KEY=VALUE strings
    device: str = "auto"
    threads: int | None = None
    seed: int | None = None
    resume: bool = False
    max_time: float | None = None  # checked (depinduce.training.budgets.checked_budgets)
    max_tokens: int | None = None
    init_train: Pathish = None
    init_dev: Pathish = None
    warm_start: Pathish = None
    encoder_path: Pathish = None
    quiet: bool = False
    force: bool = False
    seed_group: tuple[int, ...] | None = None  # the --seeds this one-seed run belongs to
    recipe_values: Mapping[str, Any] = field(default_factory=dict)  # further recipe values (**overrides)


@dataclass(frozen=True)
class SeedRun:
    """One seed of a multi-seed call: its run directory and the call that trains it (None: a resume found it
    finished)."""

    seed: int
    run: Path
    call: TrainCall | None


def setting_strings(key: str, value: Any) -> list[str]:
    """A keyword override as the ``--set`` strings the recipe resolver reads (a mapping: one per nested key)."""
    if isinstance(value, Mapping):
        if key not in ("train", "model_config"):
            raise RecipeError(f"{key}: only 'train' and 'model_config' take a mapping of recipe values")
        return [item for name, inner in value.items() for item in setting_strings(f"{key}.{name}", inner)]
    # strings stay raw (a string field keeps the text); anything else as JSON, which YAML reads back unchanged
    return [f"{key}={value if isinstance(value, str) else json.dumps(value)}"]


def resume_hint(parent: Path, seeds: list[int], stopped: list[int], unstarted: list[int],
                unsaved: list[int] = ()) -> str:
    """The line a multi-seed call ends with when stopped on request: what stopped (checkpointed, or before it
    saved anything), what never started, and the command resuming it — only where a resume can start."""
    def seeds_of(group: Sequence[int]) -> str:
        return f"seed{'s' if len(group) > 1 else ''} {', '.join(map(str, group))}"

    parts = [f"{seeds_of(stopped)} stopped cleanly (checkpointed)"] if stopped else []
    if unsaved:
        parts.append(f"{seeds_of(unsaved)} stopped before {'their' if len(unsaved) > 1 else 'its'} next checkpoint "
                     "(that training is lost)")
    if unstarted:
        parts.append(f"{seeds_of(unstarted)} not started")
    what = "stopped on request: " + ", ".join(parts)
    if not any((parent / SEED_FOLDER.format(seed=seed) / CONFIG_FILE).is_file() for seed in seeds):
        return f"{what}; no seed saved its settings, so there is nothing to resume: run the same command again"
    command = shell_command("depinduce", "train", "--resume", "--out", parent, "--seeds", ",".join(map(str, seeds)))
    return f"{what}; continue all with `{command}`"


# a call's values and the options that give them, in the order a child's command line has them
_FLAGS = {"model": "--model", "data": "--data", "recipe": "--recipe", "seed": "--seed", "max_time": "--max-time",
          "max_tokens": "--max-tokens", "init_train": "--init-train", "init_dev": "--init-dev",
          "warm_start": "--warm-start", "encoder_path": "--encoder-path"}
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
CHILD_PROGRESS_EVERY = 1.0  # seconds between a seed's progress lines (this process redraws every REFRESH_TTY)
REFRESH_TTY = 0.5  # seconds between redraws of the status line on a terminal
REFRESH_LOG = 30.0  # between status lines in a log, as the progress bar does


def child_command(call: TrainCall, device: str, threads: int | None) -> list[str]:
    """The ``depinduce train`` command line that makes the run of ``call`` (on the job's device and threads)."""
    args = [sys.executable, "-m", "depinduce", "train", "--out", str(call.out), "--device", device]
    for key, flag in _FLAGS.items():
        value = getattr(call, key)
        if value is not None:
            args += [flag, str(value)]
    for key in ("resume", "force", "quiet"):
        if getattr(call, key):
            args.append(f"--{key}")
    if call.seed_group is not None:
        args += ["--seed-group", ",".join(map(str, call.seed_group))]
    if threads is not None:
        args += ["--threads", str(threads)]
    for item in call.settings:
        args += ["--set", item]
    for key, value in call.recipe_values.items():
        for item in setting_strings(key, value):
            args += ["--set", item]
    return args


def job_devices(choice: str, jobs: int) -> list[str]:
    """The device of each of the ``jobs`` slots: several GPUs one seed each (round robin), else all alike."""
    import torch

    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cuda" and torch.cuda.device_count() > 1:
        return [f"cuda:{slot % torch.cuda.device_count()}" for slot in range(jobs)]
    return [choice] * jobs


def job_threads(threads: int | None, devices: list[str]) -> int | None:
    """``--threads`` as given; on CPU without it, the cores divided among the seeds running at once."""
    if threads is not None or not devices or devices[0] != "cpu":
        return threads
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // len(devices))


def compact(progress: ProgressLine | None) -> str:
    """A seed's last progress line shortened to what the status line shows: ``epoch 2/40 45% 1,234 tok/s``."""
    if progress is None:
        return ""
    return " ".join([f"epoch {progress.epoch}", f"{progress.percent}%"]
                    + ([f"{progress.speed} tok/s"] if progress.speed else []))


def speed_of(progress: ProgressLine | None) -> float:
    return progress.tokens_per_second if progress is not None else 0.0


@dataclass
class _Job:
    """One running seed: its process, the reading end of its stderr and its last progress line."""

    seed: int
    run: Path
    slot: int
    process: subprocess.Popen
    fd: int
    pending: str = ""
    progress: ProgressLine | None = None
    open: bool = True
    started: float = field(default_factory=time.monotonic)


def _with_parent() -> Callable[[], None] | None:
    """What a seed's process runs before it starts (Linux): SIGTERM when this process dies, however it dies
    (SIGKILL included), so a seed never trains on alone — it stops cleanly at its next step, checkpointed."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def in_child() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # this process died before the request was made
            os.kill(os.getpid(), signal.SIGTERM)

    return in_child


_PR_SET_PDEATHSIG = 1


def _spawn(item: SeedRun, slot: int, device: str, threads: int | None) -> _Job:
    """Start one seed's process with its stderr on a pipe: it writes complete lines, its progress among them
    (:class:`ProgressLine`, every :data:`CHILD_PROGRESS_EVERY` seconds)."""
    assert item.call is not None
    command = child_command(item.call, device, threads)
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{PROGRESS_EVERY: f"{CHILD_PROGRESS_EVERY:g}"})
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                               start_new_session=True, preexec_fn=_with_parent())
    assert process.stderr is not None
    return _Job(item.seed, item.run, slot, process, process.stderr.fileno())


class _Display:
    """The children's lines, prefixed by seed, and one status line of every running seed."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.shown = ""
        self.last = 0.0

    def line(self, text: str) -> None:
        self._clear()
        say(text)
        self._draw(self.shown)

    def status(self, jobs: list[_Job], *, force: bool = False) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if not force and now - self.last < (REFRESH_TTY if self.tty else REFRESH_LOG):
            return
        self.last = now
        parts = [f"seed {job.seed}: {compact(job.progress) or 'starting'}" for job in jobs]
        total = sum(speed_of(job.progress) for job in jobs)
        # the sum first: a narrow terminal cuts the line's end
        text = " | ".join(([f"together {total:,.0f} tok/s"] if len(jobs) > 1 and total else []) + parts)
        if self.tty:
            self._clear()
            self._draw(text)
        elif parts:
            say(text)

    def close(self) -> None:
        self._clear()
        self.shown = ""

    def _draw(self, text: str) -> None:
        self.shown = text
        if self.tty and text and not self.quiet:
            sys.stderr.write(printable(text)[: max(20, shutil.get_terminal_size().columns - 1)])
            sys.stderr.flush()

    def _clear(self) -> None:
        if self.tty and self.shown and not self.quiet:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def _read(job: _Job, display: _Display) -> None:
    """Take what the child wrote: a progress line becomes its status, every other whole line is printed (a
    ``\\r``-ended fragment, which no seed should write, is dropped)."""
    try:
        chunk = os.read(job.fd, 65536)
    except OSError:  # the other end is gone: the child has exited
        chunk = b""
    if not chunk:
        job.open = False
        chunk = b"\n" if job.pending else b""
    job.pending += _ANSI.sub("", chunk.decode("utf-8", "replace"))
    pieces = re.split(r"(\r\n|\r|\n)", job.pending)
    job.pending = pieces.pop()
    for text, end in zip(pieces[::2], pieces[1::2]):
        if not text.strip():
            continue
        if (progress := ProgressLine.parse(text)) is not None:
            job.progress = progress
        elif end != "\r":
            display.line(f"seed {job.seed}: {text.rstrip()}")


def _close(job: _Job) -> None:
    assert job.process.stderr is not None
    job.process.stderr.close()


@contextmanager
def _forwarded_signals(jobs: dict[int, _Job], state: dict[str, int]) -> Iterator[None]:
    """Ctrl-C and SIGTERM here are sent on to every running seed, once per signal received."""

    def handler(signum: int, frame: Any) -> None:
        state["signals"] += 1
        state["signum"] = state.get("signum") or signum
        if state["signals"] > 2:  # a third: the seeds are killed (see run_seed_jobs) and this process ends
            raise KeyboardInterrupt
        for job in jobs.values():
            if job.process.poll() is None:
                job.process.send_signal(signum)

    with stop_signals_handled(handler):
        yield


def _ending(run: Path) -> str | None:
    """How the seed's run ended, from its manifest (None: no outcome recorded, or no readable manifest)."""
    try:
        runs = read_manifest(run / MANIFEST_FILE)["runs"]
    except DepinduceError:
        return None
    return (runs[-1].get("outcome") or {}).get("reason") if runs else None


def _together(runs: list[Path]) -> float:
    """Training tokens per second of the runs added up: each run's tokens read over its seconds in training
    steps, from its last evaluation (what the seeds ran at side by side)."""
    total = 0.0
    for run in runs:
        try:
            records = read_metrics(run / METRICS_FILE)
        except DepinduceError:
            continue
        record = records[-1] if records else {}
        if record.get("tokens_seen") and record.get("train_s"):
            total += record["tokens_seen"] / record["train_s"]
    return total


def run_seed_jobs(plan: list[SeedRun], jobs: int, *, parent: Path, device: str, threads: int | None,
                  quiet: bool) -> SeedRuns:
    """Train the seeds of ``plan`` ``jobs`` at a time; returns every seed's run directory, in ``plan``'s order."""
    seeds = [item.seed for item in plan]
    display = _Display(quiet)
    for item in plan:
        if item.call is None and not quiet:
            display.line(f"seed {item.seed}: {item.run} already finished; skipped")
    waiting = deque(item for item in plan if item.call is not None)
    width = min(jobs, len(waiting)) or 1
    devices = job_devices(device, width)
    per_job_threads = job_threads(threads, devices)
    if not quiet:
        where = ", ".join(sorted(set(devices))) + (f", {per_job_threads} thread(s) each" if per_job_threads else "")
        display.line(f"seeds {', '.join(map(str, seeds))}: {width} at a time on {where}, in {parent}/seed-S")
    running: dict[int, _Job] = {}
    free = list(range(width))
    failed: list[tuple[int, int]] = []
    started: list[int] = []
    state = {"signals": 0, "signum": 0}
    selector = selectors.DefaultSelector()
    with _forwarded_signals(running, state):
        try:
            while waiting or running:
                while waiting and free and not state["signals"] and not failed:
                    item, slot = waiting.popleft(), free.pop(0)
                    job = _spawn(item, slot, devices[slot], per_job_threads)
                    running[job.fd] = job
                    started.append(item.seed)
                    selector.register(job.fd, selectors.EVENT_READ)
                if not running:
                    break
                for key, _ in selector.select(timeout=REFRESH_TTY):
                    job = running[key.fd]
                    _read(job, display)
                    if not job.open:
                        selector.unregister(job.fd)
                for fd, job in list(running.items()):
                    if job.open or job.process.poll() is None:
                        continue
                    del running[fd]
                    _close(job)
                    free.append(job.slot)
                    if job.process.returncode in STOP_EXIT_CODES.values():
                        state["signals"] += not state["signals"]  # stopped on request alone: start no more
                        state["signum"] = state.get("signum") or job.process.returncode - 128
                    elif job.process.returncode != 0 and not state["signals"]:
                        failed.append((job.seed, job.process.returncode))
                display.status(list(running.values()))
        finally:
            for job in running.values():  # an error here: the children do not outlive this process
                job.process.kill()
            selector.close()
            display.close()
    runs = SeedRuns(item.run for item in plan)
    if failed:
        unstarted = [item.seed for item in waiting]
        raise ResourceError(
            f"seed{'s' if len(failed) > 1 else ''} {', '.join(f'{s} (exit code {c})' for s, c in failed)} failed "
            f"(its lines above, 'seed S: …', say why)"
            + (f"; seeds {', '.join(map(str, unstarted))} not started" if unstarted else ""))
    if state["signals"]:
        ended = {seed: _ending(run) for seed, run in zip(seeds, runs) if seed in started}
        stopped = [seed for seed, ending in ended.items() if ending == "signal"]  # it recorded its checkpoint
        unsaved = [seed for seed, ending in ended.items() if ending not in ("signal", "completed", "early_stop")]
        unstarted = [item.seed for item in waiting]
        if stopped or unsaved or unstarted:  # a stop after every seed had finished stopped nothing: exit 0
            runs.stop = signal.Signals(state.get("signum") or signal.SIGTERM).name
            if not quiet:
                display.line(resume_hint(parent, seeds, stopped, unstarted, unsaved))
    elif not quiet and 1 < len(started) <= width:  # they all ran side by side
        display.line(f"seeds {', '.join(map(str, started))}: together {_together(runs):,.0f} training tokens/s "
                     "(each run's tokens read / its seconds in training steps, added up)")
    return runs
