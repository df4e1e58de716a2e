"""Distributed data parallel: the same ``depinduce train`` command under ``torchrun --nproc_per_node N``.

torchrun sets ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``; when ``WORLD_SIZE`` > 1 the engine joins a process group
(NCCL on GPUs, gloo on CPUs), wraps the loss module in DDP so gradients are averaged across ranks, gives each
rank its own batch of every step, and lets rank 0 alone write files.  A single process needs none of this and
every helper here is then a cheap no-op, so the engine has one code path.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from depinduce.errors import ResourceError, UsageError


@dataclass
class DistContext:
    """Where this process stands: its rank, the number of ranks and its device."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    backend: str | None = None

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


def resolve_device(choice: str, local_rank: int = 0) -> torch.device:
    """``auto`` | ``cpu`` | ``cuda`` | ``cuda:N`` → a torch device; asking for CUDA without one is an error."""
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cpu":
        return torch.device("cpu")
    if choice.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ResourceError(f"--device {choice}: this torch build or machine has no CUDA device")
        if choice == "cuda":
            return torch.device("cuda", local_rank % torch.cuda.device_count())
        try:
            device = torch.device(choice)
        except RuntimeError:
            raise UsageError(f"--device {choice}: not a device name") from None
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ResourceError(f"--device {choice}: only {torch.cuda.device_count()} CUDA device(s)")
        return device
    raise UsageError(f"--device must be auto, cpu, cuda or cuda:N, not {choice!r}")


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
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, timeout=datetime.timedelta(minutes=60))
    return DistContext(rank=rank, world_size=world_size, local_rank=local_rank, device=device, backend=backend)


def teardown(context: DistContext) -> None:
    if context.distributed and dist.is_initialized():
        dist.destroy_process_group()


def wrap(module: torch.nn.Module, context: DistContext, *, find_unused_parameters: bool) -> torch.nn.Module:
    """DDP around ``module`` when distributed; the module itself otherwise."""
    if not context.distributed:
        return module
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [context.device.index] if context.device.type == "cuda" else None
    return DistributedDataParallel(module, device_ids=device_ids, find_unused_parameters=find_unused_parameters)
