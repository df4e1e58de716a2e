"""Keeping a CPU training process's resident memory close to what its tensors actually use.

Why this exists: batches of different shapes (length buckets) make glibc's heap fragment.  Freed activations
stay resident as holes between long-lived allocations, and the holes grow with every new batch shape: measured
on the 4-layer × 256 configuration, the resident set climbed from 0.7 GB to 2.0 GB over 200 steps while the live
tensors stayed at 0.45 GB.  One thing pins the holes and one releases them:

- oneDNN keeps a cache of up to 1024 compiled primitives, one per input shape, allocated among the tensors.
  The backends run their linear maps through oneDNN (``kernels.py``), so each caps that cache with
  :func:`limit_onednn_primitive_cache` when it is built (about 3% slower steps, far less fragmentation).
  Under ``precision: bf16`` torch's bfloat16 matrix products go through ideep, oneDNN's C++ wrapper, which
  keeps a cache of its own (``LRU_CACHE_CAPACITY``, 1024 entries): about 0.27 MB per product shape, 2.7 MB more
  live heap per UDGN 4 × 256 step, 108 MB after 40 steps and growing.  The same function caps it at 32 entries,
  about one step's shapes (the four layers reuse theirs): flat memory, and no slower than the full cache
  (measured: README, bfloat16 training).  Not at 0, which crashes torch 2.13 at the first bfloat16 product;
- :func:`release_free_heap` (glibc's ``malloc_trim``) hands the free holes back to the kernel.  It belongs
  between training steps; a backend's ``encode`` calls it at the start of every training forward (after the
  engine has freed the previous step's gradients).  It acts only when the resident set has grown past the
  working set, so the re-faulted pages cost little.

Recomputation in backward (``recompute_ffn`` for StructFormer, ``recompute_lstm`` for UDGN, ``recompute`` for the
Probabilistic Transformer) saves an activation at the price of running part of the forward pass again.  It pays
only where memory would otherwise run short, so ``auto`` (the default) decides per training step with
:func:`should_recompute`: recompute when the activations it would save exceed a quarter of the memory the
system still has available.  The numbers computed are the same either way.

Serving every allocation from the heap (glibc's ``M_MMAP_MAX`` 0: no fresh, zeroed ``mmap`` pages per large
tensor) was measured and is not used: StructFormer 8 × 512 steps about 2% faster, at 1–4% more memory.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from functools import lru_cache
from typing import Any

import torch

ONEDNN_CACHE_VARIABLE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
IDEEP_CACHE_VARIABLE = "LRU_CACHE_CAPACITY"
IDEEP_CACHE_ENTRIES = 32


def limit_onednn_primitive_cache(capacity: int = 0) -> None:
    """Cap oneDNN's primitive cache, and ideep's cache of bfloat16 matrix products at
    :data:`IDEEP_CACHE_ENTRIES`, unless the user set either; each is read when its library first builds a
    primitive, so this only takes effect before the process's first oneDNN convolution (or bfloat16 product)."""
    os.environ.setdefault(ONEDNN_CACHE_VARIABLE, str(capacity))
    os.environ.setdefault(IDEEP_CACHE_VARIABLE, str(IDEEP_CACHE_ENTRIES))


@lru_cache(maxsize=1)
def _glibc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim  # noqa: B018 - missing outside glibc (e.g. musl)
    except (OSError, AttributeError):
        return None
    return libc


def resident_bytes() -> int | None:
    """This process's resident set size now (Linux), None elsewhere."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def available_bytes() -> int | None:
    """The memory the system can still give this process without swapping (Linux ``MemAvailable``), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def should_recompute(setting: bool | str, saved_bytes: int, share: float = 0.25) -> bool:
    """Whether a training step recomputes an activation of ``saved_bytes`` in backward instead of keeping it:
    ``True``/``False`` as configured; ``"auto"``: only when it exceeds ``share`` of the available memory (when
    that is unknown, e.g. off Linux, recompute: the safe side)."""
    if setting != "auto":
        return bool(setting)
    if torch.compiler.is_compiling():  # train.compile: the compiler plans the step's memory itself
        return False
    available = available_bytes()
    return available is None or saved_bytes > share * available


class _Watch:
    """The resident size one step after the last release: the working set that later steps should fit in."""

    baseline: int | None = None


def release_free_heap(slack_bytes: int = 64 * 2**20) -> bool:
    """Call after every optimiser step: returns the heap's free pages to the operating system (glibc only) when
    the resident set has grown more than ``slack_bytes`` beyond the working set measured one step after the
    previous release.  True when it released.

    Releasing after every step would keep the resident set lowest, but the next step faults the pages back in
    (about 15% of a small model's step); releasing only once fragmentation has grown the resident set costs a
    fraction of that and bounds the peak near the working set plus ``slack_bytes``.
    """
    if torch.compiler.is_compiling():  # train.compile traces the step: the heap is left to the next eager call
        return False
    libc = _glibc()
    if libc is None:
        return False
    resident = resident_bytes()
    if resident is None or _Watch.baseline is None:
        _Watch.baseline = resident
        return False
    if resident <= _Watch.baseline + slack_bytes:
        return False
    libc.malloc_trim(0)
    _Watch.baseline = None  # measured again once the next step has touched its pages
    return True
