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
    # "AMD EPYC" names several generations; family and model number tell them apart (AMD: family 25 = Zen 3/4,
    # 26 = Zen 5), and their kernels' relative speeds differ.
    generation: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "model name" and model in ("unknown", "", "x86_64"):
                    model = value
                elif key in ("cpu family", "model", "stepping"):  # "model" alone would clash with a benchmark's
                    generation.setdefault("cpu_" + key.removeprefix("cpu ").replace(" ", "_"), value)
                elif key == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass
    wanted = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "avx512_vp2intersect", "amx_tile")
    description: dict[str, object] = {"cpu": model, **generation,
                                      "vector_extensions": [flag for flag in wanted if flag in flags],
                                      "logical_cpus": os.cpu_count()}
    # Caps on the instruction sets the libraries may use (e.g. AVX2 code paths measured on an AVX-512 CPU):
    # the flags above say what the CPU has, these what the kernels were allowed to use.
    caps = {name: os.environ[name] for name in ISA_CAP_VARIABLES if os.environ.get(name)}
    if caps:
        description["isa_caps"] = caps
    return description


ISA_CAP_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS")


def machine_description(device: str = "cpu") -> dict[str, object]:
    """:func:`cpu_description`, and on a CUDA device also the GPU, torch's CUDA version and the float32 modes
    that decide which matrix kernels run (TF32 in cuBLAS products and cuDNN convolutions/RNNs)."""
    description = cpu_description()
    if not device.startswith("cuda"):
        return description
    import torch

    where = torch.device(device)
    description.update({
        "gpu": torch.cuda.get_device_name(where),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
    })
    return description
