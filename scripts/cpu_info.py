"""The CPU a benchmark ran on: its model and the vector extensions that decide which kernels are fast on it.

Speed figures are only comparable within one run on one machine; every benchmark prints this beside them.
"""

from __future__ import annotations

import os
import platform


def cpu_description() -> dict[str, object]:
    """The CPU model and the vector extensions that decide which kernels are fast on it."""
    model = platform.processor() or "unknown"
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name") and model in ("unknown", "", "x86_64"):
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    wanted = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile")
    description: dict[str, object] = {"cpu": model, "vector_extensions": [flag for flag in wanted if flag in flags],
                                      "logical_cpus": os.cpu_count()}
    # Caps on the instruction sets the libraries may use (e.g. AVX2 code paths measured on an AVX-512 CPU):
    # the flags above say what the CPU has, these what the kernels were allowed to use.
    caps = {name: os.environ[name] for name in ISA_CAP_VARIABLES if os.environ.get(name)}
    if caps:
        description["isa_caps"] = caps
    return description


ISA_CAP_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS")
