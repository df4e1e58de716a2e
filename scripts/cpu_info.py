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
    return {"cpu": model, "vector_extensions": [flag for flag in wanted if flag in flags],
            "logical_cpus": os.cpu_count()}
