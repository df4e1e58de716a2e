"""The module a training step runs (forward and loss) as the gradient loop calls it: eager on exact batches (the
default), or on static shapes (:mod:`.shapes`) and compiled (``train.compile``).

Why: on a GPU the step is bound by the host — thousands of small kernels launched one by one from Python.
``torch.compile`` fuses them (``default``) and ``reduce-overhead`` also replays the whole step as captured CUDA
graphs; ``cudagraphs`` replays the captured step without inductor's code generation (the eager kernels, traced
in seconds where inductor takes minutes per shape); all specialise the step to its shapes, hence static shapes.
What is compiled is the module DDP wraps: forward and loss, and through AOTAutograd their backward; the
optimiser step is torch's fused Adam on CUDA (:mod:`.optim`).  With ``compile: off`` on the CPU nothing here
changes a number: the engine runs the objective's :class:`~depinduce.training.objectives.LossModule` on exact
batches; on a GPU it runs the static-shape loss on the exact batch (padded only under ``static_shapes: on``),
whose index gathers need no read of the device by the host (the same numbers to round-off).  See
``docs/guide/gpu.md``.  (:mod:`.step` runs this module, then backward and the update.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from depinduce.errors import RecipeError
from depinduce.training.config import TrainConfig
from depinduce.training.objectives import LossModule, MaskedLM, NextWordLM, Objective, StreamLM
from depinduce.training.shapes import StaticLoss, has_batch_statistics, pad_inputs

Log = Callable[[str], None]
# Distinct shapes one compiled step may take before torch falls back to eager: an epoch's static shapes fit.
RECOMPILE_LIMIT = 64
# Backends whose forward and loss trace whole (no graph break) and whose compiled steps match eager ones
# (tests/test_compile_step.py); the others refuse ``train.compile`` rather than train unchecked.
COMPILE_CHECKED = ("structformer", "udgn", "prpn", "probformer")


def check_compile(mode: str, model_name: str) -> None:
    """A one-line refusal of ``train.compile`` for a backend not checked under the compiler."""
    if mode != "off" and model_name not in COMPILE_CHECKED:
        raise RecipeError(f"train.compile: model '{model_name}' is not checked under torch.compile (graph breaks "
                          f"and compiled gradients are checked for {', '.join(COMPILE_CHECKED)} only); "
                          "set compile: off")


def prefetch_on(mode: str, device: torch.device, objective: Objective) -> bool:
    """``prefetch``: ``on``, ``off``, or ``auto`` = on CUDA; never for continuous text, whose next chunk's
    inputs depend on the state the step before left (refused in one line when asked for)."""
    if isinstance(objective, StreamLM):
        if mode == "on":
            raise RecipeError("train.prefetch: on does not apply to lm_mode continuous (each chunk carries the "
                              "previous step's state); set prefetch: auto")
        return False
    return mode == "on" or (mode == "auto" and device.type == "cuda")


def static_support(objective: Objective, config: TrainConfig, stepwise: bool) -> str | None:
    """Why static shapes cannot apply to this training (None: they can)."""
    if not isinstance(objective, (MaskedLM, NextWordLM)):
        return f"objective '{objective.name}'{' (lm_mode continuous)' if objective.name == 'lm' else ''}"
    if stepwise:
        return "one update per pass"
    return None


def static_shapes_on(config: TrainConfig, objective: Objective, stepwise: bool = False) -> bool:
    """``static_shapes``: ``on``, ``off``, or ``auto`` = on where the objective allows and the step is
    compiled."""
    execution = config.execution
    reason = static_support(objective, config, stepwise)
    if execution.static_shapes == "on" and reason is not None:
        raise RecipeError(f"train.static_shapes: on does not apply to {reason}; set static_shapes: auto")
    if execution.static_shapes == "auto":
        return execution.compile != "off" and reason is None
    return execution.static_shapes == "on"


def indexed_loss_on(config: TrainConfig, objective: Objective, stepwise: bool = False,
                    device: torch.device | None = None) -> bool:
    """Whether the step takes the loss that gathers the predicted positions by an index made on the CPU
    (:class:`~depinduce.training.shapes.StaticLoss`): on static shapes, and off the CPU wherever the objective
    allows it, since there the exact loss's boolean selection of the predicted rows makes the host wait for
    the device at every step."""
    off_cpu = device is not None and device.type != "cpu"
    return static_shapes_on(config, objective, stepwise) or (
        off_cpu and static_support(objective, config, stepwise) is None)


@dataclass
class TrainStep:
    """What the engine's step runs: ``module`` (wrapped by DDP, then compiled), ``pad``, which turns a prepared CPU
    batch into the module's inputs (None: the batch as prepared), and whether those come in ``static`` shapes."""

    module: torch.nn.Module
    pad: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]] | None = None
    static: bool = False


def build_step(model: torch.nn.Module, objective: Objective, loss_module: LossModule, config: TrainConfig, *,
               pad_index: int, stepwise: bool = False, device: torch.device | None = None) -> TrainStep:
    """The step's module for ``config``: the exact ``loss_module``, or its index-gathering twin, on static shapes
    or (an eager step on a GPU) on the exact batch.  A compiled step needs the twin on static shapes (the exact
    loss picks the masked rows by a boolean index, a shape the data decide, which breaks the compiler's graph),
    so ``compile`` without static shapes is refused in one line."""
    static = static_shapes_on(config, objective, stepwise)
    if not static and config.execution.compile != "off":
        reason = static_support(objective, config, stepwise)
        raise RecipeError("train.compile runs the step on static shapes, which "
                          + (f"do not apply to {reason}" if reason else "static_shapes: off turns off")
                          + "; set compile: off" + ("" if reason else " or static_shapes: auto"))
    if not indexed_loss_on(config, objective, stepwise, device):
        return TrainStep(loss_module)
    if isinstance(objective, MaskedLM):
        module = StaticLoss(model, "mlm", mask_index=objective.mask_index, boundary_index=-1)
    else:
        assert isinstance(objective, NextWordLM)
        module = StaticLoss(model, "lm", mask_index=-1, boundary_index=objective.boundary_index)
    chunks = objective.chunks if isinstance(objective, MaskedLM) else None
    pad = partial(pad_inputs, module.objective, pad_index=pad_index, pad_rows=not has_batch_statistics(model),
                  chunks=chunks, to_ladder=static)
    return TrainStep(module, pad, static)


class _Marked(torch.nn.Module):
    """The compiled module, each call a new step for CUDA graph trees (``reduce-overhead``): the previous step's
    outputs may be overwritten (the loop keeps copies of the numbers it reads later: :mod:`.step`)."""

    def __init__(self, compiled: Any) -> None:
        super().__init__()
        self.compiled = compiled

    def forward(self, **inputs: torch.Tensor) -> Any:
        torch.compiler.cudagraph_mark_step_begin()
        return self.compiled(**inputs)


def configure_dynamo() -> None:
    """The compiler's settings for a training step: room for an epoch's static shapes, and the backends' LSTMs
    (UDGN's parser) traced into the graph rather than breaking it."""
    for name in ("recompile_limit", "cache_size_limit"):  # the name changed across torch versions
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), RECOMPILE_LIMIT))
            break
    torch._dynamo.config.allow_rnn = True


def compiled(module: torch.nn.Module, mode: str, device: torch.device, log: Log, *,
             static: bool = True, backend: str = "inductor") -> torch.nn.Module:
    """``module`` compiled as ``train.compile`` asks (``off``: itself), specialised to each shape when the
    batches are ``static`` (else torch's dynamic shapes).  ``reduce-overhead`` captures CUDA graphs, so on
    another device it acts as ``default`` (said once); ``cudagraphs`` is torch's backend of that name (AOTAutograd's
    forward and backward graphs of eager kernels, replayed as CUDA graphs), and on another device those graphs run
    as they are (``aot_eager``, said once).  ``backend``: torch.compile's (the tests use ``aot_eager``, the same
    graphs without inductor's C++ build)."""
    if mode == "off":
        return module
    if mode == "reduce-overhead" and device.type != "cuda":
        log(f"note: compile reduce-overhead captures CUDA graphs; on {device.type} it acts as default")
        mode = "default"
    if mode == "cudagraphs":
        if device.type != "cuda":
            log(f"note: compile cudagraphs captures CUDA graphs; on {device.type} its graphs run uncaptured")
        backend = "cudagraphs" if device.type == "cuda" else "aot_eager"
    configure_dynamo()
    options: dict[str, Any] = {"mode": mode} if backend == "inductor" else {}
    return _Marked(torch.compile(module, backend=backend, dynamic=False if static else None, **options))
