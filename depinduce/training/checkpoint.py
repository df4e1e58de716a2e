"""Checkpoint files: atomic writes, and reading them back safely.

Every file is written to a temporary name in the same folder and moved over the real name with ``os.replace``,
so a kill at any moment leaves either the old file or the new one, never half of one.

``model.pt`` is a plain state dict (what ``parse`` loads).  ``last.pt`` is everything a resumed run needs —
model, optimiser, schedule, the RNG states (Python, torch, CUDA, and every rank's masking generator), the
position (epoch, step within the epoch, the epoch's batch order), the best metric and the early-stopping
counter — stored as tensors and primitive containers only, so both load with ``torch.load(weights_only=True)``
and a checkpoint can never execute code.
"""

from __future__ import annotations

import hashlib
import io
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from depinduce.errors import ModelError, NotFoundError
from depinduce.io.outputs import atomic_write_bytes, atomic_write_text  # noqa: F401 - this module's writers
from depinduce.models.neural import torch_load_weights_only

FORMAT = "depinduce-train-state"
VERSION = 1
REQUIRED = ("format", "version", "model", "optimizer", "schedule", "rng", "position", "progress")


def atomic_torch_save(obj: Any, path: Path) -> None:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def cpu_state_dict(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached CPU copy of ``module``'s state dict (safe to save while training continues)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}


def save_model(path: Path, state: Mapping[str, torch.Tensor]) -> None:
    atomic_torch_save(dict(state), path)


def state_digest(state: Mapping[str, torch.Tensor]) -> str:
    """sha256 over parameter names, dtypes, shapes and bytes: equal digests = bitwise-equal models."""
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().to("cpu").contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


# ------------------------------------------------------------------------------------------------ RNG


def capture_rng(mask_generator: torch.Generator) -> dict[str, Any]:
    """This process's random states (the masking generator separately: it is per rank)."""
    return {
        "python": random.getstate(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "mask": mask_generator.get_state(),
    }


def restore_rng(state: Mapping[str, Any], mask_generator: torch.Generator) -> None:
    random.setstate(_as_python_state(state["python"]))
    torch.set_rng_state(state["torch"])
    cuda = state.get("cuda") or []
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)
    mask_generator.set_state(state["mask"])


def _as_python_state(value: Any) -> tuple:
    """``random.setstate`` wants tuples; a checkpoint may hand lists back."""
    version, internal, gauss = value
    return (version, tuple(internal), gauss)


# ------------------------------------------------------------------------------------------------ loading


def load_train_state(path: Path) -> dict[str, Any]:
    """Read ``last.pt`` with ``weights_only=True``; missing, corrupted or foreign files are one-line errors."""
    if not path.is_file():
        raise NotFoundError(f"{path}: no training checkpoint to resume from")
    try:
        state = torch_load_weights_only(path)
    except Exception as exc:  # truncated zip, pickle garbage, a foreign object: torch raises many types
        raise ModelError(
            f"{path}: not a readable depinduce checkpoint ({exc.__class__.__name__}); "
            "it may be truncated or corrupted"
        ) from exc
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ModelError(f"{path}: not a depinduce training checkpoint (no '{FORMAT}' marker)")
    if state.get("version") != VERSION:
        raise ModelError(f"{path}: training checkpoint version {state.get('version')!r}; this depinduce "
                         f"reads version {VERSION}")
    missing = [k for k in REQUIRED if k not in state]
    if missing:
        raise ModelError(f"{path}: incomplete training checkpoint (missing {', '.join(missing)})")
    model = state["model"]
    if not isinstance(model, dict) or not all(isinstance(v, torch.Tensor) for v in model.values()):
        raise ModelError(f"{path}: the checkpoint's model is not a state dict")
    return state
