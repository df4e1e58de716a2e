"""One optimiser step of the gradient loop — forward, loss, backward, update — in one small object, so a
compiled or static-shape step can take its place without the loop changing (:class:`OptimiserStep`)."""

from __future__ import annotations

import math

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

    def __call__(self, inputs: dict[str, torch.Tensor], step: int) -> tuple[float, float]:
        """(summed NLL, predicted tokens) of step number ``step`` (1-based, for the divergence message)."""
        device = self.context.device
        inputs = {k: v.to(device, non_blocking=True) for k, v in inputs.items()}
        if self.stepwise:
            nll_sum = count_sum = 0.0
            for out in self.objective.updates(self.model, **inputs):
                self.update(out.loss, step)
                nll_sum, count_sum = nll_sum + float(out.nll_sum), count_sum + float(out.count)
            return nll_sum, count_sum
        with autocast(self.precision, device):
            loss, nll, count = self.wrapped(**inputs)
        self.update(loss, step)
        return float(nll), float(count)

    def update(self, loss: torch.Tensor, step: int) -> None:
        """One optimiser update on ``loss`` (whose graph is built, gradients not yet taken)."""
        loss_value = float(loss.detach())
        finite = math.isfinite(loss_value)
        if self.context.distributed:  # every rank must raise together, or the others wait in backward forever
            finite = self.context.max(0.0 if finite else 1.0) == 0.0
        if not finite:
            raise RecipeError(f"training diverged at step {step}: the loss is {loss_value}; "
                              "lower train.lr or set train.clip")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_gradients(self.params, self.clip)
        self.optimizer.step()
        self.schedule.after_step()
