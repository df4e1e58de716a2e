"""The model ``parse`` uses when no ``--model`` is given: the newest finished run under ``./runs``, else the
bundled default model shipped inside the package.

The bundled model is an ordinary run directory (``config.yaml``, ``vocab.json``, ``model.pt``) in
``depinduce/bundled/default/`` plus ``card.json``: how it was trained (commands, data checksums), its licence and
its scores beside right-branching's, measured by ``parse`` + ``eval``.  ``card.json`` records the sha256 of
``model.pt``, and loading refuses a file that does not match its card.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from depinduce.checksum import sha256_file
from depinduce.data.run_files import read_card, read_manifest, read_run_config
from depinduce.errors import DepinduceError, ModelError
from depinduce.io.filenames import CONFIG_FILE, MANIFEST_FILE, MODEL_FILE

BUNDLED_NAME = "default"
RUNS_DIR = Path("runs")


def bundled_dir() -> Path:
    return Path(str(resources.files("depinduce") / "bundled" / BUNDLED_NAME))


def model_card() -> dict[str, Any]:
    """The bundled model's card (``card.json``), checked against its schema."""
    path = bundled_dir() / "card.json"
    try:
        return read_card(path)
    except DepinduceError as exc:
        raise ModelError(f"{path}: the bundled model's card is missing or unreadable ({exc}); "
                         "reinstall depinduce") from exc


def verified_bundled_dir() -> Path:
    """The bundled model's folder, after checking ``model.pt`` against the checksum on its card."""
    folder = bundled_dir()
    expected = model_card().get("model_sha256")
    weights = folder / MODEL_FILE
    if not weights.is_file() or sha256_file(weights) != expected:
        raise ModelError(f"{weights}: missing or does not match its card's sha256; reinstall depinduce")
    return folder


def _finished(run_dir: Path) -> float | None:
    """When the run last finished (manifest.json's modification time), or None if it has not (no model.pt, or
    its latest start has no 'finished' record).  A run stopped by its budget or by Ctrl-C/SIGTERM counts: it
    stopped cleanly and kept its best model; ``parse`` then says how it ended and how good it is.  A damaged
    manifest or config is an :class:`InputError` naming the file and the field."""
    if not (run_dir / MODEL_FILE).is_file() or not (run_dir / CONFIG_FILE).is_file():
        return None
    manifest = run_dir / MANIFEST_FILE
    if not manifest.exists():
        return None
    runs = read_manifest(manifest)["runs"]
    read_run_config(run_dir / CONFIG_FILE)
    if not runs or "finished" not in runs[-1]:
        return None
    return manifest.stat().st_mtime


def newest_finished_run(root: Path = RUNS_DIR, warn: Callable[[str], None] | None = None) -> Path | None:
    """The most recently finished run directly under ``root``; a run whose files are damaged is skipped, with
    a line to ``warn`` saying why, so one broken run does not take the others down."""
    if not root.is_dir():
        return None
    finished = []
    for path in sorted(root.iterdir()):
        if not path.is_dir():
            continue
        try:
            when = _finished(path)
        except DepinduceError as exc:
            if warn is not None:
                warn(f"warning: skipped {path}: {exc}")
            continue
        if when is not None:
            finished.append((when, path))
    return max(finished)[1] if finished else None


@dataclass(frozen=True)
class ModelChoice:
    """What ``parse`` will load and the line that tells the user why."""

    target: str  # a run directory or a registered name, as load_model takes it
    reason: str
    warnings: tuple[str, ...] = ()  # runs skipped because their files are damaged


def default_model_choice(root: Path = RUNS_DIR) -> ModelChoice:
    skipped: list[str] = []
    run = newest_finished_run(root, skipped.append)
    if run is not None:
        return ModelChoice(str(run), f"parse: using {run} (the most recently finished run under {root}/)",
                           tuple(skipped))
    card = model_card()
    return ModelChoice(BUNDLED_NAME, f"parse: no finished run under {root}/; using the bundled default model "
                                     f"({card.get('summary', card.get('backend', ''))}; `depinduce models` shows "
                                     "its card)", tuple(skipped))
