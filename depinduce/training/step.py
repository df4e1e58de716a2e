"""One optimiser step of the gradient loop — forward, loss, backward, update — in one small object, so a
compiled or static-shape step can take its place without the loop changing (:class:`OptimiserStep`), and the
step's numbers left on the device until the loop reads them (:class:`PendingSums`).

Why the numbers wait: reading a device scalar (``float(loss)``) makes the host wait for the device to finish
the step, three times a step; on a GPU that stall is most of a small model's step.  The loop reads them every
``log_every`` steps, at each evaluation and checkpoint and at the end of an epoch (where it always showed or
recorded them), and checks there that no step's loss was infinite or NaN.  The logged sums are the same float64
additions, in the same order, as when each step was read at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from depinduce.errors import RecipeError
from depinduce.training import distributed
from depinduce.training.objectives import Objective
from depinduce.training.optim import Schedule, clip_gradients
from depinduce.training.precision import autocast


class OptimiserStep:
    """Trains on one batch's prepared inputs: one update, or (``stepwise``: RNGTr's ``updates: per_pass``) one
    per refinement pass, each loss computed after the previous update."""

    def __init__(self, model: torch.nn.Module, wrapped: torch.nn.Module, objective: Objective,
                 optimizer: torch.optim.Optimizer, schedule: Schedule, params: list[torch.nn.Parameter], *,
                 clip: float | None, precision: str, context: distributed.DistContext, stepwise: bool) -> None:
        self.model, self.wrapped, self.objective = model, wrapped, objective
        self.optimizer, self.schedule, self.params = optimizer, schedule, params
        self.clip, self.precision, self.context, self.stepwise = clip, precision, context, stepwise

    def __call__(self, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        """Each update's (loss, summed NLL, predicted tokens) as one float64 tensor of 3, on the device and not
        read (a fresh tensor: a captured CUDA graph's next replay does not overwrite it)."""
        device = self.context.device
        inputs = {k: v.to(device, non_blocking=True) for k, v in inputs.items()}
        if self.stepwise:
            sums = []
            for out in self.objective.updates(self.model, **inputs):
                sums.append(step_numbers(out.loss, out.nll_sum, out.count))
                self.update(out.loss)
            return sums
        with autocast(self.precision, device):
            loss, nll, count = self.wrapped(**inputs)
        numbers = step_numbers(loss, nll, count)
        self.update(loss)
        return [numbers]

    def update(self, loss: torch.Tensor) -> None:
        """One optimiser update on ``loss`` (whose graph is built, gradients not yet taken)."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_gradients(self.params, self.clip)
        self.optimizer.step()
        self.schedule.after_step()


def step_numbers(loss: torch.Tensor, nll: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """An update's (loss, NLL, count) as one float64 tensor on the device: float64 holds a float32 or bfloat16
    value and a token count exactly, so reading it later gives what ``float()`` of each gave."""
    with torch.no_grad():  # one cast and one stack (the float64 count promotes the rest), not three casts
        return torch.stack([loss, nll, count.to(torch.float64)])


@dataclass
class StepNumbers:
    """One step's numbers as the loop adds them: the summed NLL and predicted tokens of its updates."""

    step: int
    nll: float
    count: float


class PendingSums:
    """The steps' numbers not read yet, read together (one host sync), in step order."""

    def __init__(self) -> None:
        self.pending: list[tuple[int, list[torch.Tensor]]] = []
        self.diverged: tuple[int, float] | None = None  # the first step read whose loss was not finite
        self.first: int | None = None  # the first step not checked yet (for a message naming a range)

    def add(self, step: int, numbers: list[torch.Tensor]) -> None:
        self.pending.append((step, numbers))
        if self.first is None:
            self.first = step

    def read(self) -> list[StepNumbers]:
        """The pending steps' numbers (their sums as ``float`` of each update's value added in order gave)."""
        if not self.pending:
            return []
        values = torch.stack([n for _, numbers in self.pending for n in numbers]).tolist()
        out, at = [], 0
        for step, numbers in self.pending:
            nll = count = 0.0
            for loss, update_nll, update_count in values[at: at + len(numbers)]:
                if self.diverged is None and not math.isfinite(loss):
                    self.diverged = (step, loss)
                nll, count = nll + update_nll, count + update_count
            at += len(numbers)
            out.append(StepNumbers(step, nll, count))
        self.pending = []
        return out

    def check(self, context: distributed.DistContext, last: int, *, together: bool = True) -> None:
        """Raise if a step read up to ``last`` diverged: on every rank at once (``together``), or on this one
        (a step failed here: the others are stopped by the failure)."""
        first, self.first = (self.first if self.first is not None else last), None
        diverged = self.diverged is not None
        if context.distributed and together:  # every rank raises together, or the others wait in backward forever
            diverged = context.max(1.0 if diverged else 0.0) > 0.0
        if not diverged:
            return
        if self.diverged is None:
            raise RecipeError(f"training diverged on another rank between steps {first} and {last}; "
                              "lower train.lr or set train.clip")
        step, loss = self.diverged
        raise RecipeError(f"training diverged at step {step}: the loss is {loss}; lower train.lr or set train.clip")
