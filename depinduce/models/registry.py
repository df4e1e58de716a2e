"""Backend discovery through the ``depinduce.models`` entry-point group — the only way the CLI finds models.

A third-party package adds a backend by declaring an entry point in that group; nothing here names a model.
A backend with its own decoders may also declare them, by name and one-line description, in the
``depinduce.decoders`` group (same entry-point name, a light module's ``dict[str, str]``), so that ``--help``
lists them without importing the backend and torch.  This module imports torch only when a class is loaded.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, distributions
from pathlib import Path
from typing import TYPE_CHECKING, Any

from depinduce.data.run_files import read_run_config
from depinduce.errors import ModelError
from depinduce.io.filenames import CONFIG_FILE, MODEL_FILE
from depinduce.models.bundled import BUNDLED_NAME, model_card, verified_bundled_dir

if TYPE_CHECKING:
    from depinduce.models.base import Backend

GROUP = "depinduce.models"
DECODER_GROUP = "depinduce.decoders"


@dataclass(frozen=True)
class Registration:
    """One registered backend: its name, where it comes from, and the entry point that loads it."""

    name: str
    provider: str
    entry_point: EntryPoint

    def load_class(self) -> type[Backend]:
        from depinduce.models.base import Backend

        try:
            cls = load_plugin(self.entry_point)
        except Exception as exc:  # a broken plugin must not take the CLI down with a traceback
            raise ModelError(
                f"backend '{self.name}' from {self.provider} failed to load ({self.entry_point.value}): {exc}"
            ) from exc
        if not (isinstance(cls, type) and issubclass(cls, Backend)):
            raise ModelError(
                f"backend '{self.name}' from {self.provider} ({self.entry_point.value}) is not a depinduce Backend"
            )
        return cls


def load_plugin(ep: EntryPoint) -> Any:
    """What ``ep`` names, imported so that the plugin's own code cannot speak for depinduce: what it prints goes to
    stderr (stdout is the command's, ``models --json`` must stay JSON), and a ``sys.exit`` in it is a failure to
    load, not the end of the command."""
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return ep.load()
    except SystemExit as exc:
        raise RuntimeError(f"it called sys.exit({exc.code!r}) while being imported") from None


def scan_entry_points(group: str) -> tuple[list[EntryPoint], list[str]]:
    """The entry points of ``group`` in every installed distribution, and a warning for each distribution whose
    metadata cannot be read (a malformed ``entry_points.txt``): importlib.metadata's own enumeration fails as a
    whole on one such file, which would take every command that lists models down with it.  As
    importlib.metadata does, the first distribution of a name on ``sys.path`` wins."""
    found: list[EntryPoint] = []
    problems: list[str] = []
    seen: set[str] = set()
    for dist in distributions():
        where = getattr(dist, "_path", None) or "a distribution"
        try:
            name = (dist.metadata["Name"] or "").lower().replace("-", "_").replace(".", "_")
            if name in seen:
                continue
            seen.add(name)
            points = list(dist.entry_points)
        except Exception as exc:  # noqa: BLE001 - any damage in one distribution's metadata
            problems.append(f"warning: {where}: unreadable entry points ({type(exc).__name__}: {exc}); its plugins "
                            "are ignored — reinstall or remove that package")
            continue
        found.extend(ep for ep in points if ep.group == group)
    return found, problems


def entry_points(group: str) -> list[EntryPoint]:
    """The entry points of ``group`` (:func:`scan_entry_points`, without the warnings)."""
    return scan_entry_points(group)[0]


def _provider(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "an unknown distribution"
    return f"{dist.metadata['Name']} {dist.version}"


def registrations() -> dict[str, Registration]:
    """All registered backends by name; two distributions providing one name is an error naming both."""
    found: dict[str, Registration] = {}
    for ep in entry_points(group=GROUP):
        reg = Registration(ep.name, _provider(ep), ep)
        previous = found.get(ep.name)
        if previous is not None:
            if previous.entry_point.value == ep.value and previous.provider == reg.provider:
                continue  # the same distribution seen twice on sys.path (e.g. an editable install)
            raise ModelError(
                f"backend '{ep.name}' is registered twice: by {previous.provider} ({previous.entry_point.value}) "
                f"and by {reg.provider} ({ep.value}); uninstall one of them"
            )
        found[ep.name] = reg
    return dict(sorted(found.items()))


def declared_decoders() -> dict[str, dict[str, str]]:
    """Backend name -> {own decoder: description}, from the ``depinduce.decoders`` group, for the registered
    backends that declare theirs there; a declaration that fails to load or is not a ``dict[str, str]`` is left
    out (help must not fail; ``depinduce models`` loads the backend itself and reports it)."""
    registered = {ep.name for ep in entry_points(group=GROUP)}
    out: dict[str, dict[str, str]] = {}
    for ep in entry_points(group=DECODER_GROUP):
        if ep.name not in registered or ep.name in out:
            continue
        try:
            declared = load_plugin(ep)
        except Exception:  # a broken plugin must not take help down
            continue
        if isinstance(declared, Mapping) and all(isinstance(v, str) for v in (*declared, *declared.values())):
            out[ep.name] = dict(declared)
    return dict(sorted(out.items()))


def backend_class(name: str) -> type[Backend]:
    """The backend class registered under ``name``."""
    regs = registrations()
    if name not in regs:
        known = ", ".join(regs) or "none"
        raise ModelError(f"unknown model '{name}'; registered backends: {known}")
    return regs[name].load_class()


def run_dir_model_name(run_dir: Path) -> str:
    """The backend name recorded in a run directory's ``config.yaml`` (key ``model``)."""
    config_path = run_dir / CONFIG_FILE
    if not config_path.is_file():
        raise ModelError(f"{run_dir}: not a run directory (no config.yaml)")
    return read_run_config(config_path)["model"]


def check_finite_weights(backend: Backend, weights: Path) -> None:
    """Refuse a model with NaN or infinite weights (a diverged run): it would parse every sentence without a
    word, into whatever shape its decoder falls back to.  One pass over the tensors, once at load time."""
    import torch

    if not isinstance(backend, torch.nn.Module):
        return
    with torch.no_grad():
        for name, tensor in [*backend.named_parameters(), *backend.named_buffers()]:
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                raise ModelError(f"{weights}: model '{backend.name}' has non-finite weights (NaN or infinity in "
                                 f"{name}); the run diverged — train it again (a lower lr, or another seed)")


def load_model(name_or_run_dir: str, *, device: str = "cpu", seed: int = 0) -> Backend:
    """A ready backend from a registered name (untrained baselines), a run directory (trained models) or
    ``default`` (the bundled model, unless a folder of that name is here).  ``device`` is checked first
    (:func:`~depinduce.models.devices.resolve_device`): CUDA where there is none is one line, not torch's error."""
    from depinduce.models.devices import resolve_device  # imports torch: not at the top (light --help)

    device = str(resolve_device(device))
    path = Path(name_or_run_dir)
    bundled = name_or_run_dir == BUNDLED_NAME and not path.is_dir()
    if bundled:
        path = verified_bundled_dir()
    if not path.is_dir():
        return backend_class(name_or_run_dir).load(None, device=device, seed=seed)
    backend = backend_class(run_dir_model_name(path)).load(path, device=device, seed=seed)
    check_finite_weights(backend, path / MODEL_FILE)
    if bundled:  # its decoder was chosen on EWT dev after training, so the card, not config.yaml, names it
        backend.default_decoder = model_card().get("decoder", backend.default_decoder)
    return backend
