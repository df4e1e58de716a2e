"""The torch device a command runs on (``--device``: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``), checked before
anything is moved there: a GPU the machine lacks is one line naming the option, not torch's assertion from deep
inside ``Module.to``.  ``train``, ``parse`` and every command that loads a model resolve it here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from depinduce.errors import ResourceError, UsageError

if TYPE_CHECKING:
    import torch


def _why_no_cuda() -> str:
    import torch

    if torch.version.cuda is None:
        return f"torch {torch.__version__} was built without CUDA"
    return f"torch {torch.__version__} is built for CUDA {torch.version.cuda}, but no GPU was found"


def resolve_device(choice: str, local_rank: int = 0) -> "torch.device":
    """``auto`` | ``cpu`` | ``cuda`` | ``cuda:N`` → a torch device (``cuda`` under torchrun: the rank's GPU);
    CUDA asked for where there is none is a :class:`ResourceError`."""
    import torch

    choice = str(choice)
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cpu":
        return torch.device("cpu")
    if choice.startswith("cuda"):
        try:
            device = torch.device(choice)
        except RuntimeError:
            raise UsageError(f"--device {choice}: not a device name (auto, cpu, cuda or cuda:N)") from None
        if device.type != "cuda":
            raise UsageError(f"--device {choice}: not a device name (auto, cpu, cuda or cuda:N)")
        if not torch.cuda.is_available():
            raise ResourceError(f"--device {choice}: CUDA is not available on this machine ({_why_no_cuda()})")
        if device.index is None:
            return torch.device("cuda", local_rank % torch.cuda.device_count())
        if device.index >= torch.cuda.device_count():
            raise ResourceError(f"--device {choice}: this machine has only {torch.cuda.device_count()} CUDA "
                                "device(s)")
        return device
    raise UsageError(f"--device must be auto, cpu, cuda or cuda:N, not {choice!r}")
