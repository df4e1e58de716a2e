"""The one policy for every file and folder depinduce writes by name.

- An existing target is refused unless the caller passes ``force``; a folder where a file is to be written is
  refused even then.  An existing FIFO or device (``/dev/null``, ``/dev/stdout``) is written into as it is (with
  ``force``): it holds no file to lose, and renaming over it would replace the device.
- Regular files are written atomically: a hidden temporary file in the same folder, fsynced, then ``os.replace``, so a
  failure or a kill at any moment leaves the old file or the new one, never half of one (and never a partial
  file from a generator that fails halfway).  A write failure (a full disk) names the file being written.
- A folder is replaced under ``force`` only when depinduce made it, as its ``manifest.json`` says (a dataset's
  lists every file it holds, so a folder the user added notes to is refused too); a folder of the user's is
  refused even with ``force``, in one line that says why.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO, Any

from depinduce import display
from depinduce.errors import NotFoundError, ResourceError, RunDirectoryError, UsageError
from depinduce.io.filenames import MANIFEST_FILE

DATASET_FORMAT = "depinduce-dataset"
RUN_FORMAT = "depinduce-run"
# keys every manifest of a dataset written before it carried a "format" has
_LEGACY_DATASET_KEYS = frozenset({"depinduce_version", "command", "source", "splits", "files"})
MANIFEST_MAX_BYTES = 4 * 2**20


def check_new_file(path: str | os.PathLike[str], force: bool, option: str = "--force") -> Path:
    """Refuse to overwrite ``path`` unless ``force``; refuse a target that is no regular file, or whose folder is
    missing.  Returns the path to write (a link's own target, so the link survives)."""
    target = Path(path)
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise ResourceError(f"{path}: cannot write ({exc.strerror or exc})") from None
    if info is not None:
        if stat.S_ISDIR(info.st_mode):
            raise UsageError(f"{path}: is a folder; give a file name")
        if not force:
            raise RunDirectoryError(f"{path}: already exists (use {option} to overwrite it)")
        target = Path(os.path.realpath(target))
    if not target.parent.is_dir():
        raise NotFoundError(f"{path}: folder {target.parent} does not exist")
    return target


def check_new_folder(path: str | os.PathLike[str], force: bool, option: str = "--force") -> Path:
    """An output folder of files we name: refused when it exists and holds anything unless ``force`` (whose
    files of the same names are then replaced, nothing else touched); refused when it is no folder, or when its
    parent is missing."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise UsageError(f"{path}: is not a folder; give a folder for the output files")
    try:
        full = target.is_dir() and any(target.iterdir())
    except OSError as exc:
        raise ResourceError(f"{path}: cannot read the folder ({exc.strerror or exc})") from None
    if full and not force:
        raise RunDirectoryError(f"{path}: already exists and is not empty (use {option} to write into it)")
    if not target.exists() and not target.parent.is_dir():
        raise NotFoundError(f"{path}: folder {target.parent} does not exist")
    return target


def write_failure(path: str | os.PathLike[str], exc: OSError) -> ResourceError:
    """The one-line error for a failed write: it names the file being written, never ``<stdout>``."""
    return ResourceError(f"{path}: cannot write ({exc.strerror or exc})")


@contextmanager
def atomic_file(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """A stream whose content becomes ``path`` only when the block ends without error (text mode is UTF-8
    with ``\\n`` line ends).  Checks nothing about an existing ``path``: callers use :func:`check_new_file`."""
    target = Path(path)
    if _is_stream(target):
        with _in_place(target, mode) as stream:
            yield stream
        return
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise write_failure(path, exc) from None
    try:
        try:
            with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": "\n"})) as stream:
                yield stream
                stream.flush()
                os.fsync(stream.fileno())
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes a private file; the output is an ordinary one
            os.replace(tmp, target)
        except OSError as exc:
            raise write_failure(path, exc) from None
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _is_stream(path: Path) -> bool:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextmanager
def _in_place(path: Path, mode: str) -> Iterator[IO[Any]]:
    """A device or FIFO, written directly; a failure names it."""
    try:
        with open(path, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": "\n"})) as stream:
            yield stream
            stream.flush()
    except OSError as exc:
        raise write_failure(path, exc) from None


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path``, a file depinduce keeps in a folder of its own, atomically (see
    :func:`atomic_file` and :func:`kept_file`)."""
    with atomic_file(kept_file(path), "wb") as stream:
        stream.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """:func:`atomic_write_bytes` for text."""
    with atomic_file(kept_file(path), "w") as stream:
        stream.write(text)


# ------------------------------------------------------------------------------- files inside depinduce's folders


def kept_file(path: str | os.PathLike[str]) -> Path:
    """``path``, a file depinduce keeps in a run or dataset folder (a log, a checkpoint, scores), when nothing but a
    regular file is there: a symbolic link (which would carry the write out of the folder) or a FIFO or device
    (which would take it in place) is refused in one line, naming the file."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return Path(path)
    except OSError as exc:
        raise write_failure(path, exc) from None
    if stat.S_ISLNK(info.st_mode):
        raise RunDirectoryError(f"{path}: is a symbolic link; depinduce writes the files of its runs and datasets "
                                "only inside their folder, never through a link (remove the link)")
    if not stat.S_ISREG(info.st_mode):
        raise RunDirectoryError(f"{path}: is not a regular file (a folder, FIFO or device); depinduce writes the "
                                "files of its runs and datasets only as regular files (move it away)")
    return Path(path)


def append_file(path: str | os.PathLike[str]) -> IO[str]:
    """``path`` (a :func:`kept_file`) opened to append UTF-8 text; a link swapped in after the check is refused by
    the open itself (``O_NOFOLLOW``)."""
    target = kept_file(path)
    try:
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            kept_file(path)  # a link now: say so
        raise write_failure(path, exc) from None
    return os.fdopen(fd, "a", encoding="utf-8", newline="\n")


def kept_folder(path: str | os.PathLike[str]) -> Path:
    """A folder depinduce keeps inside a run (``tensorboard/``), made when missing, and refused in one line when it
    is a symbolic link, no folder, or cannot be written (a read-only folder is found before anything writes)."""
    folder = Path(path)
    if folder.is_symlink():
        raise RunDirectoryError(f"{path}: is a symbolic link; depinduce writes the files of its runs only inside "
                                "their folder, never through a link (remove the link)")
    try:
        folder.mkdir(exist_ok=True)
        if not folder.is_dir():
            raise UsageError(f"{path}: is not a folder; move it away")
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise write_failure(path, exc) from None
    return folder


def written_file(path: str | os.PathLike[str], force: bool,
                 option: str = "--force") -> AbstractContextManager[IO[Any]]:
    """:func:`check_new_file` then :func:`atomic_file`: the whole policy for one named output file."""
    return atomic_file(check_new_file(path, force, option))


# ------------------------------------------------------------------------------------------------ folders


def _manifest(folder: Path) -> dict[str, Any] | None:
    path = folder / MANIFEST_FILE
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MANIFEST_MAX_BYTES:
            return None
        with open(path, encoding="utf-8") as stream:
            data = json.load(stream)
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def folder_kind(folder: Path) -> str | None:
    """``"dataset"`` or ``"run"`` when ``folder``'s manifest says depinduce wrote it, else None."""
    manifest = _manifest(folder)
    if manifest is None:
        return None
    if manifest.get("format") == RUN_FORMAT:
        return "run"
    if manifest.get("format") == DATASET_FORMAT or (
            "format" not in manifest and _LEGACY_DATASET_KEYS <= set(manifest)):
        return "dataset"
    return None


def _foreign_entries(folder: Path) -> list[str]:
    """Entries of a dataset folder its manifest does not list (what the user put there)."""
    listed = (_manifest(folder) or {}).get("files")
    known = set(listed) if isinstance(listed, dict) else set()
    return sorted(p.name for p in folder.iterdir() if p.name != MANIFEST_FILE and p.name not in known)


def check_replaceable_folder(folder: str | os.PathLike[str], force: bool, kind: str,
                             advice: str = "use --force to replace it") -> None:
    """Refuse an existing, non-empty ``folder`` unless ``force`` and depinduce made it as a ``kind``
    (``"dataset"`` or ``"run"``); a dataset holding files its manifest does not list is refused too.  Without
    ``force``, ``advice`` (the options that would be taken) is offered only where ``force`` would be: a folder
    it would refuse gets the reason instead, never an option that is then refused."""
    path = Path(folder)
    if not (path.exists() or path.is_symlink()):
        return
    if not path.is_dir():
        raise RunDirectoryError(f"{folder} exists and is not a folder; choose another --out")
    try:
        empty = not any(path.iterdir())
    except OSError as exc:
        raise ResourceError(f"{folder}: cannot read the folder ({exc.strerror or exc})") from None
    if empty:
        return
    refusal = _force_refusal(path, kind)
    if refusal is None and not force:
        raise RunDirectoryError(f"{folder} already exists; {advice}")
    if refusal is not None:
        raise RunDirectoryError(f"{folder}: {refusal}" if force else f"{folder} already exists and is {refusal}")


def _force_refusal(path: Path, kind: str) -> str | None:
    """What the folder is that ``--force`` may not replace, and what to do instead; None when it may."""
    found = folder_kind(path)
    if found != kind:
        what = f"a depinduce {found}, not a {kind}" if found else \
            f"not a {kind} depinduce wrote (no depinduce manifest.json)"
        return f"{what}; --force replaces only a {kind} depinduce wrote, so choose another --out or move the " \
               "folder away yourself"
    foreign = _foreign_entries(path) if kind == "dataset" else []
    if foreign:
        return f"a dataset holding {display.quote(foreign[0])}, which its manifest.json does not list (not " \
               "written by depinduce) and --force would delete; move it away first"
    return None
