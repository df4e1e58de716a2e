"""Distributed data parallel: the same ``depinduce train`` command under ``torchrun --nproc_per_node N``.

torchrun sets ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``; when ``WORLD_SIZE`` > 1 the engine joins a process group
(NCCL on GPUs, gloo on CPUs), wraps the loss module in DDP so gradients are averaged across ranks, gives each
rank its own batch of every step, and lets rank 0 alone write files.  A single process needs none of this and
every helper here is then a cheap no-op, so the engine has one code path.
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from depinduce.errors import UsageError
from depinduce.models.devices import resolve_device


@dataclass
class DistContext:
    """Where this process stands: its rank, the number of ranks and its device."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    backend: str | None = None
    owned: bool = False  # this context joined the process group, so its teardown leaves it

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def _comm_device(self) -> torch.device:
        """NCCL communicates CUDA tensors only; gloo CPU tensors."""
        return self.device if self.backend == "nccl" else torch.device("cpu")

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sum of ``values`` over ranks (float64, so token counts stay exact)."""
        if not self.distributed:
            return list(values)
        tensor = torch.tensor(values, dtype=torch.float64, device=self._comm_device())
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor.tolist()

    def max(self, value: float) -> float:
        """The largest ``value`` of all ranks, on every rank (stop decisions must be taken together)."""
        if not self.distributed:
            return value
        tensor = torch.tensor([float(value)], dtype=torch.float64, device=self._comm_device())
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return float(tensor.item())

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank."""
        if not self.distributed:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order, on every rank."""
        if not self.distributed:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out


def setup(device_choice: str) -> DistContext:
    """Join the torchrun process group when there is one; otherwise a single-process context."""
    world_size = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world_size <= 1:
        return DistContext(device=resolve_device(device_choice))
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = resolve_device(device_choice, local_rank)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    owned = not dist.is_initialized()
    if owned:
        dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=collective_timeout()))
    return DistContext(rank=rank, world_size=world_size, local_rank=local_rank, device=device, backend=backend,
                       owned=owned)


def teardown(context: DistContext) -> None:
    """Leave the process group if this context joined it; one joined by :func:`session` outlives the run."""
    if context.owned and dist.is_initialized():
        dist.destroy_process_group()


def launched_rank() -> int:
    """This process's torchrun rank (0 when not under torchrun): who prints a multi-run's status lines."""
    return int(os.environ.get("RANK", "0") or 0)


def under_torchrun() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1") or 1) > 1


def collective_timeout() -> float:
    """Seconds a rank waits in a collective for its peers before failing: long enough for rank 0's
    evaluations and checkpoints (the others wait in the next step's all-reduce meanwhile), short enough that a
    rank whose peer died ends instead of hanging when torchrun cannot end it (other nodes).
    ``DEPINDUCE_DIST_TIMEOUT`` (seconds) overrides the default of 60 minutes."""
    value = os.environ.get("DEPINDUCE_DIST_TIMEOUT", "")
    try:
        seconds = float(value) if value else 3600.0
    except ValueError:
        raise UsageError(f"DEPINDUCE_DIST_TIMEOUT={value!r}: give a number of seconds") from None
    if not seconds > 0:
        raise UsageError(f"DEPINDUCE_DIST_TIMEOUT={value!r}: give a positive number of seconds")
    return seconds


# What gloo, NCCL and the c10d store say when a peer rank is gone or silent (gloo raises a plain RuntimeError).
_PEER_LOST = ("Connection closed by peer", "Connection reset by peer", "Broken pipe", "Timed out", "timed out",
              "Timeout", "NCCL error", "Failed to recv")


def peer_failure(exc: BaseException) -> str | None:
    """The first line of ``exc`` when it says another rank died, was killed or went silent (so this rank can end
    with one line instead of a traceback); None for any other error."""
    if not isinstance(exc, RuntimeError):
        return None
    text = str(exc).strip()
    if not (isinstance(exc, getattr(dist, "DistError", ())) or any(mark in text for mark in _PEER_LOST)):
        return None
    first = text.splitlines()[0] if text else type(exc).__name__
    return re.sub(r"^\[[^\]]*\]\s*", "", first)[:200]  # without gloo's [source.cc:NNN] prefix


@contextmanager
def session(device_choice: str) -> Iterator[DistContext]:
    """One process group for several runs in a row (``train --seeds`` under torchrun): every run's
    :func:`setup` joins it and its teardown leaves it in place.  Destroying and re-creating a group on
    torchrun's store hangs the second rendezvous, which is why the runs share one."""
    context = setup(device_choice)
    try:
        yield context
    finally:
        teardown(context)


def wrap(module: torch.nn.Module, context: DistContext, *, find_unused_parameters: bool) -> torch.nn.Module:
    """DDP around ``module`` when distributed; the module itself otherwise."""
    if not context.distributed:
        return module
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [context.device.index] if context.device.type == "cuda" else None
    return DistributedDataParallel(module, device_ids=device_ids, find_unused_parameters=find_unused_parameters)
