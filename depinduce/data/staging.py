"""Where ``preprocess`` writes and how: the default output folder, a staged temporary folder that becomes the
dataset only when everything succeeded (so an error or SIGTERM never leaves a half-written dataset), the output
folder's lock, and the manifest with the checksum of every file."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from depinduce.checksum import sha256_file
from depinduce.display import say
from depinduce.errors import ResourceError, UsageError
from depinduce.io.filenames import MANIFEST_FILE
from depinduce.io.outputs import DATASET_FORMAT, check_replaceable_folder
from depinduce.locking import check_force_target, exclusive, make_parent


DATA_ROOT = Path("data")


def default_output(command: str, *, treebank: Sequence[str] = (), inputs: Sequence[str] = (),
                   nltk_corpus: str | None = None) -> Path:
    """Where ``preprocess`` writes without ``--out``: ``data/ptb``, ``data/<treebank folder name>`` (of a
    folder, or of the folder holding the split files), ``data/<input stem>`` or ``data/<nltk corpus>``."""
    if command == "ptb":
        return DATA_ROOT / "ptb"
    if command == "ud":
        if not treebank:
            raise UsageError("preprocess ud: give --treebank PATH")
        first = Path(treebank[0])
        folder = first if first.is_dir() else first.parent
        name = folder.resolve().name
        return DATA_ROOT / name
    if nltk_corpus is not None:
        return DATA_ROOT / nltk_corpus
    named = [i for i in inputs if i != "-"]
    if not named:
        raise UsageError("preprocess text: reading stdin, so there is no name to derive the output from; "
                         "give --out DIR")
    return DATA_ROOT / Path(named[0]).stem


def check_output(out: Path, force: bool) -> None:
    """Refuse an existing output before any work is done: without ``force`` always, with it unless the folder
    is a dataset depinduce wrote and holds nothing else (see :mod:`depinduce.io.outputs`)."""
    check_replaceable_folder(out, force, "dataset")


@contextmanager
def staged_output(out: Path, force: bool) -> Iterator[Path]:
    """A temporary folder beside ``out`` that becomes ``out`` when the block ends without error."""
    check_output(out, force)
    make_parent(out)
    for stale in sorted(out.parent.glob(f".{glob.escape(out.name)}.*.partial")):
        # the caller holds the folder's lock, so no live process is writing these: leftovers of a killed run
        shutil.rmtree(stale, ignore_errors=True)
        say(f"removed {stale}, left half-written by an interrupted preprocess")
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    except OSError as exc:
        raise ResourceError(f"{out}: cannot create the output folder ({exc.strerror or exc})") from None
    try:
        try:
            yield tmp
        except OSError as exc:  # a full disk, a quota: name the output, not <stdout>
            raise ResourceError(f"{out}: cannot write {Path(exc.filename).name if exc.filename else 'the dataset'} "
                                f"({exc.strerror or exc})") from None
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp makes a private folder; the dataset is an ordinary one
        check_output(out, force)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
            old.rmdir()
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_lines(path: Path, lines: Iterable[str]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as stream:
        for line in lines:
            stream.write(line)
            stream.write("\n")


def write_manifest(folder: Path, manifest: dict[str, object]) -> None:
    """Add the checksum of every file already in ``folder`` and write ``manifest.json`` beside them."""
    manifest["files"] = {p.name: {"sha256": sha256_file(p), "bytes": p.stat().st_size} for p in sorted(folder.iterdir())}
    text = json.dumps({"format": DATASET_FORMAT, **manifest}, indent=2, ensure_ascii=False) + "\n"
    (folder / MANIFEST_FILE).write_text(text, encoding="utf-8")


def locked(command: str, out: str | Path, inputs: Sequence[str | Path | None], force: bool,
           run: Callable[[], dict[str, object]]) -> dict[str, object]:
    """Run one preprocess command holding the output folder's lock; SIGTERM cleans up like an error."""
    real_inputs = [p for p in inputs if p is not None and str(p) != "-"]
    if force:
        check_force_target(out, real_inputs, "--out")
    with exclusive(out, f"preprocess {command}"), terminate_as_exit():
        return run()


@contextmanager
def terminate_as_exit() -> Iterator[None]:
    """SIGTERM raises SystemExit while the block runs, so the staged folder is removed as on any error."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
