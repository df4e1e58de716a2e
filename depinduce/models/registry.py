"""Backend discovery through the ``depinduce.models`` entry-point group — the only way the CLI finds models.

A third-party package adds a backend by declaring an entry point in that group; nothing here names a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from depinduce.data.files import load_yaml, read_text_file
from depinduce.errors import InputError, ModelError
from depinduce.models.base import Backend
from depinduce.models.bundled import BUNDLED_NAME, model_card, verified_bundled_dir

GROUP = "depinduce.models"


@dataclass(frozen=True)
class Registration:
    """One registered backend: its name, where it comes from, and the entry point that loads it."""

    name: str
    provider: str
    entry_point: EntryPoint

    def load_class(self) -> type[Backend]:
        try:
            cls = self.entry_point.load()
        except Exception as exc:  # a broken plugin must not take the CLI down with a traceback
            raise ModelError(
                f"backend '{self.name}' from {self.provider} failed to load ({self.entry_point.value}): {exc}"
            ) from exc
        if not (isinstance(cls, type) and issubclass(cls, Backend)):
            raise ModelError(
                f"backend '{self.name}' from {self.provider} ({self.entry_point.value}) is not a depinduce Backend"
            )
        return cls


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


def backend_class(name: str) -> type[Backend]:
    """The backend class registered under ``name``."""
    regs = registrations()
    if name not in regs:
        known = ", ".join(regs) or "none"
        raise ModelError(f"unknown model '{name}'; registered backends: {known}")
    return regs[name].load_class()


def run_dir_model_name(run_dir: Path) -> str:
    """The backend name recorded in a run directory's ``config.yaml`` (key ``model``)."""
    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise ModelError(f"{run_dir}: not a run directory (no config.yaml)")
    config = load_yaml(read_text_file(config_path, "run configuration"), config_path)
    if not isinstance(config, dict) or not isinstance(config.get("model"), str):
        raise InputError(config_path, None, "no 'model' key naming the backend")
    return config["model"]


def load_model(name_or_run_dir: str, *, device: str = "cpu", seed: int = 0) -> Backend:
    """A ready backend from a registered name (untrained baselines), a run directory (trained models) or
    ``default`` (the bundled model, unless a folder of that name is here)."""
    path = Path(name_or_run_dir)
    bundled = name_or_run_dir == BUNDLED_NAME and not path.is_dir()
    if bundled:
        path = verified_bundled_dir()
    if not path.is_dir():
        return backend_class(name_or_run_dir).load(None, device=device, seed=seed)
    backend = backend_class(run_dir_model_name(path)).load(path, device=device, seed=seed)
    if bundled:  # its decoder was chosen on EWT dev after training, so the card, not config.yaml, names it
        backend.default_decoder = model_card().get("decoder", backend.default_decoder)
    return backend
