"""Training precision: ``train.precision: fp32 | tf32 | bf16`` (side by side: ``docs/guide/gpu.md``).

The default, ``fp32``, computes the authors' function to round-off; on CUDA it also turns TF32 off for cuDNN's
convolutions (PyTorch's default allows it there), so float32 means float32 on every device.  ``tf32`` keeps
float32 storage and every float32 op, but lets CUDA's matrix products and cuDNN's convolutions round their
operands to TF32 (10 bits of mantissa, float32 accumulation) on Ampere or newer GPUs; on the CPU it is refused,
since there is nothing it would change.  ``bf16`` runs each training step's forward
pass under ``torch.autocast(dtype=torch.bfloat16)``: matrix products, convolutions and LSTMs take bfloat16
operands (float32 accumulation), while the weights, the optimiser state, the gradients' sums, the loss and the
backend's structure (StructFormer's parent distribution, UDGN's head distribution) stay float32.  Evaluation,
model selection and parsing always run in float32.  It is a numerics switch, off by default and not a faster
kernel: the numbers differ from float32 by bfloat16's rounding (8 bits of mantissa).

Where it pays: CPUs with bfloat16 instructions (``avx512_bf16`` or ``amx_bf16`` in /proc/cpuinfo), where oneDNN's
bfloat16 products run 2–3× faster than float32, and GPUs.  Elsewhere bfloat16 is emulated and slower, which is
said once when training starts.  Backends opt in (``NeuralBackend.mixed_precision``) once their fused CPU kernels
either step aside under autocast (``models/layers/kernels.lowered``) or make autocast's casts themselves (UDGN's
DGN heads); the others refuse the setting in one line.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import torch

from depinduce.errors import RecipeError

BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_has_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool | None:
    """Whether the CPU has bfloat16 arithmetic instructions; None where /proc/cpuinfo cannot be read."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.partition(":")[2].split())
            return any(flag in flags for flag in BF16_CPU_FLAGS)
    return None


def check_precision(precision: str, model_name: str, supported: bool, device: torch.device,
                    log: Callable[[str], None]) -> None:
    """Refuse ``bf16`` for a backend that does not support it and ``tf32`` off CUDA; warn where bfloat16 is
    emulated."""
    if precision == "fp32":
        return
    if precision == "tf32":
        if device.type != "cuda":
            raise RecipeError(f"train.precision: tf32 changes CUDA's float32 products only; on {device.type} "
                              "set precision: fp32 (or bf16)")
        return
    if not supported:
        raise RecipeError(f"train.precision: model '{model_name}' trains in float32 only; set precision: fp32")
    if device.type == "cpu" and cpu_has_bf16() is False:
        log("note: precision bf16 on a CPU without bfloat16 instructions (no avx512_bf16/amx_bf16): the products "
            "are emulated and usually slower than float32")


def set_float32_products(precision: str, device: torch.device) -> None:
    """On CUDA, whether float32 products and convolutions may use TF32 (``tf32`` only); elsewhere nothing."""
    if device.type == "cuda":
        allowed = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = allowed
        torch.backends.cudnn.allow_tf32 = allowed


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager[object]:
    """The context a training step's forward pass runs in (``tf32``: none, it is a setting of the products)."""
    if precision in ("fp32", "tf32"):
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)
