"""Optimiser, learning-rate schedule and gradient clipping, as a recipe's ``train`` section asks.

Adam adds weight decay to the gradient (L2, what the StructFormer/UDGN code does); AdamW decays the weights
directly.  Schedules: ``plateau`` halves (``plateau_factor``) the rate when the dev loss has not improved for
``plateau_patience`` evaluations (the papers' setting); ``linear`` warms up over ``warmup_steps`` and decays
linearly to ``min_lr`` at the last step; ``constant`` keeps the rate (after an optional warmup).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from depinduce.errors import RecipeError, RunDirectoryError
from depinduce.training.config import TrainConfig


def build_optimizer(params: Iterable[torch.nn.Parameter], config: TrainConfig) -> torch.optim.Optimizer:
    kwargs = dict(lr=config.lr, betas=(config.beta1, config.beta2), eps=config.eps,
                  weight_decay=config.weight_decay)
    if config.optimizer == "adamw":
        return torch.optim.AdamW(params, **kwargs)
    return torch.optim.Adam(params, **kwargs)


class Schedule:
    """The learning-rate schedule, stepped after every optimiser step and after every evaluation."""

    def __init__(self, optimizer: torch.optim.Optimizer, config: TrainConfig, total_steps: int) -> None:
        self.kind = config.schedule
        self.optimizer = optimizer
        self.scheduler: Any
        if self.kind == "plateau":
            if config.warmup_steps:
                raise RecipeError("warmup_steps applies to the 'linear' and 'constant' schedules, not 'plateau'")
            self.scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
                optimizer, mode="min", factor=config.plateau_factor, patience=config.plateau_patience,
                min_lr=config.min_lr)
            return
        warmup = config.warmup_steps
        floor = min(1.0, config.min_lr / config.lr)
        total = max(total_steps, warmup + 1)

        def factor(step: int) -> float:
            if warmup and step < warmup:
                return (step + 1) / warmup
            if self.kind == "constant":
                return 1.0
            remaining = max(0.0, (total - step) / (total - warmup))
            return floor + (1.0 - floor) * remaining

        self.scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

    def after_step(self) -> None:
        if self.kind != "plateau":
            self.scheduler.step()

    def after_eval(self, dev_loss: float | None) -> None:
        """Plateau schedules react to the evaluation loss; the others ignore it."""
        if self.kind == "plateau" and dev_loss is not None:
            self.scheduler.step(dev_loss)

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def state_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("kind") != self.kind:
            raise RunDirectoryError(f"the checkpoint's schedule is '{state.get('kind')}', the config's '{self.kind}'")
        self.scheduler.load_state_dict(state["scheduler"])


def clip_gradients(params: Iterable[torch.nn.Parameter], max_norm: float | None) -> torch.Tensor:
    """Clip the global gradient norm to ``max_norm`` (None: only measure); returns the norm before clipping.

    The norm stays a tensor so a GPU run does not wait for it at every step.
    """
    with_grad = [p for p in params if p.grad is not None]
    if not with_grad:
        return torch.zeros(())
    if max_norm is None:
        return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad.detach()) for p in with_grad]))
    return torch.nn.utils.clip_grad_norm_(with_grad, max_norm)
