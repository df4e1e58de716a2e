"""One writer per output folder: an exclusive lock beside the folder, released by the OS when the process ends.

``preprocess`` and ``train`` hold it for their whole run, so a second command into the same folder fails at once
with one line naming the process that holds it, instead of interleaving files.  The lock is a hidden file
``.NAME.lock`` beside the folder (not inside it: the folder may not exist yet, and must stay untouched until the
run writes it), locked with ``flock``; a process killed by any signal releases it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from depinduce.errors import ResourceError, RunDirectoryError, UsageError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no locking
    fcntl = None  # type: ignore[assignment]


def absolute(path: str | os.PathLike[str]) -> Path:
    """The path made absolute and normalised without resolving links (``.`` → the current folder's path)."""
    return Path(os.path.abspath(path))


def make_parent(target: Path, shown: str | os.PathLike[str] | None = None) -> None:
    """Create the folder that will hold ``target``; failure is one line naming the target as the user wrote it."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = "a file is in the way" if isinstance(exc, (FileExistsError, NotADirectoryError)) else exc.strerror
        raise ResourceError(f"{shown or target}: cannot create the output folder ({reason or exc})") from None


@contextmanager
def exclusive(target: str | os.PathLike[str], command: str) -> Iterator[None]:
    """Hold the lock of ``target`` (a folder, existing or not) for the duration of the block."""
    shown = target
    target = absolute(target)
    make_parent(target, shown)
    if fcntl is None:
        yield
        return
    lock_path = target.parent / f".{target.name}.lock"
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ResourceError(f"{shown}: cannot create its lock file {lock_path} ({exc.strerror})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
            raise RunDirectoryError(f"{shown} is in use by {holder}; wait for it to end or choose another output "
                                    "folder") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"process {os.getpid()} (depinduce {command})\n".encode(), 0)
        try:
            yield
        finally:
            try:
                lock_path.unlink()
            except OSError:
                pass
    finally:
        os.close(fd)


def check_force_target(target: str | os.PathLike[str], inputs: list[str | os.PathLike[str]], option: str) -> None:
    """``--force`` replaces ``target`` whole: refuse it when that would delete an input, or the folder the user
    is in (``--out .``)."""
    out = absolute(target)
    cwd = absolute(os.getcwd())
    if out == cwd or out in cwd.parents:
        raise UsageError(f"{target}: refusing to replace a folder that holds the current folder ({option} .)")
    for item in inputs:
        path = absolute(item)
        if path == out or out in path.parents:
            raise UsageError(f"{target}: refusing to replace it: it holds the input {item}")
        if path in out.parents:
            raise UsageError(f"{target}: refusing to write inside the input {item}")
