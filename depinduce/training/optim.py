"""Optimiser, learning-rate schedule and gradient clipping, as a recipe's ``train`` section asks.

Adam adds weight decay to the gradient (L2, what the StructFormer/UDGN code does); AdamW decays the weights
directly.  Schedules: ``plateau`` halves (``plateau_factor``) the rate when the dev loss has not improved for
``plateau_patience`` evaluations (the papers' setting); ``linear`` decays linearly to ``min_lr`` at the end
of the budget: at the last step of ``epochs``, or, when the run has a token budget (``max_tokens``), at its last
training token, so that a budget in tokens ends with the rate at ``min_lr`` on every machine; ``constant`` keeps
the rate.  Every schedule can start with a linear warm-up over ``warmup_steps``; the
plateau schedule does not react to evaluations during it (the dev loss of a model still warming up says nothing
about the rate).  ``parser_lr`` puts the backend's parser in a parameter group of its own; every schedule
scales both groups by the same factor.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from depinduce.errors import RunDirectoryError
from depinduce.training.config import TrainConfig


def build_optimizer(params: Iterable[torch.nn.Parameter], config: TrainConfig,
                    parser_params: Iterable[torch.nn.Parameter] = ()) -> torch.optim.Optimizer:
    """Adam/AdamW over ``params``; ``parser_params`` (the parser's, when ``parser_lr`` is set) form a second
    group at ``parser_lr`` and must not also be in ``params``.  ``fused_adam`` (the default): torch's fused
    kernel, one op per step for every parameter where torch's default on the CPU loops over them (about ten ops
    each): a GPU step is bound by the ops the host issues, and on the CPU the fused update is faster too
    (``docs/results/2026-11-27-ops-on-the-gpu-route.md``).  The same update to float round-off;
    ``fused_adam: false`` keeps torch's default."""
    given = config.optimiser
    kwargs = dict(lr=given.lr, betas=(given.beta1, given.beta2), eps=given.eps, weight_decay=given.weight_decay)
    groups: list[dict[str, Any]] = [{"params": list(params)}]
    parser = list(parser_params)
    if parser:
        groups.append({"params": parser, "lr": given.parser_lr if given.parser_lr is not None else given.lr})
    fused = {"fused": True} if given.fused_adam else {}
    if given.optimizer == "adamw":
        return torch.optim.AdamW(groups, **kwargs, **fused)
    return torch.optim.Adam(groups, **kwargs, **fused)


class Schedule:
    """The learning-rate schedule, stepped after every optimiser step and after every evaluation."""

    def __init__(self, optimizer: torch.optim.Optimizer, config: TrainConfig, total_steps: int,
                 token_budget: float | None = None) -> None:
        schedule = config.lr_schedule
        self.kind = schedule.schedule
        self.optimizer = optimizer
        self.scheduler: Any
        self.warmup = schedule.warmup_steps
        self.steps = 0
        # linear over a token budget: the rate follows the share of the budget read (after_tokens)
        self.token_budget = token_budget if self.kind == "linear" else None
        self.floor = min(1.0, schedule.min_lr / config.optimiser.lr)
        self.base_lrs = [float(group["lr"]) for group in optimizer.param_groups]
        if self.token_budget is not None:
            self.scheduler = None
            self._warm(0)
            return
        if self.kind == "plateau":
            self.scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
                optimizer, mode="min", factor=schedule.plateau_factor, patience=schedule.plateau_patience,
                min_lr=schedule.min_lr)
            self._warm(0)
            return
        warmup = schedule.warmup_steps
        floor = min(1.0, schedule.min_lr / config.optimiser.lr)
        total = max(total_steps, warmup + 1)

        def factor(step: int) -> float:
            if warmup and step < warmup:
                return (step + 1) / warmup
            if self.kind == "constant":
                return 1.0
            remaining = max(0.0, (total - step) / (total - warmup))
            return floor + (1.0 - floor) * remaining

        self.scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)

    def _warm(self, step: int) -> None:
        """Plateau schedule's warm-up: the rate of update ``step`` (0-based) is ``(step + 1) / warmup`` of the
        base rate; from then on the plateau scheduler owns the rate."""
        if self.warmup and step <= self.warmup:
            fraction = min(1.0, (step + 1) / self.warmup)
            for group, base in zip(self.optimizer.param_groups, self.base_lrs):
                group["lr"] = base * fraction

    def after_step(self) -> None:
        self.steps += 1
        if self.scheduler is None or self.kind == "plateau":
            self._warm(self.steps)
        else:
            self.scheduler.step()

    def after_tokens(self, tokens_seen: float) -> None:
        """A linear schedule over a token budget sets the rate of the next update from the share of the budget
        read so far (after the warm-up); the other schedules count steps and ignore this."""
        if self.token_budget is None or self.steps < self.warmup:
            return
        remaining = max(0.0, 1.0 - tokens_seen / self.token_budget)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = base * (self.floor + (1.0 - self.floor) * remaining)

    def after_eval(self, dev_loss: float | None) -> None:
        """Plateau schedules react to the evaluation loss (after the warm-up); the others ignore it."""
        if self.kind == "plateau" and dev_loss is not None and self.steps >= self.warmup:
            self.scheduler.step(dev_loss)

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def state_dict(self) -> dict[str, Any]:
        # over tokens the rate lives in the optimiser's groups (restored with it); only the step count is kept
        scheduler = self.scheduler.state_dict() if self.scheduler is not None else {}
        return {"kind": self.kind, "scheduler": scheduler, "steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("kind") != self.kind:
            raise RunDirectoryError(f"the checkpoint's schedule is '{state.get('kind')}', the config's '{self.kind}'")
        if self.scheduler is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        # a checkpoint from before warm-up applied to plateau: its run had none, so it is past any warm-up
        self.steps = int(state.get("steps", self.warmup))


@torch.no_grad()
def clip_gradients(params: Iterable[torch.nn.Parameter], max_norm: float | None) -> torch.Tensor:
    """Clip the global gradient norm to ``max_norm`` (None: only measure); returns the norm before clipping.

    What ``torch.nn.utils.clip_grad_norm_`` computes, bit for bit: the norm of the parameters' gradient norms,
    and every gradient times min(1, max_norm / (norm + 1e-6)).  Written with torch's documented foreach
    operations (one op for all the norms, one for all the scalings) and without its per-parameter device moves:
    on a GPU a step is bound by the ops the host issues, and torch's function issued two per parameter.  The
    norm stays a tensor, so a GPU run does not wait for it at every step.
    """
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.zeros(())
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    if max_norm is not None:
        torch._foreach_mul_(grads, torch.clamp(max_norm / (total + 1e-6), max=1.0))
    return total
