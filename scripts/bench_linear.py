"""GFLOP/s of the position-wise linear maps, forward and backward, through both CPU kernels (prints figures).

depinduce routes its linear maps by the CPU (``models/layers/kernels.py: onednn_linear_pays``): oneDNN's
convolution kernels where torch's CPU capability is AVX-512, MKL's ``F.linear`` elsewhere.  Which wins depends on
the core (full-width AVX-512 on Zen 5, two 256-bit halves on Zen 4, AVX2 only on older CPUs), so this measures
both on the CPU at hand, for the shapes of StructFormer's and UDGN's layers at their small (4 × 256, 4,096-token
batches) and paper (8 × 512) configurations.  Each figure is the best of ``--repeats`` timings of ``--steps``
forward + backward passes (6·B·T·C_in·C_out floating-point operations each); the two kernels alternate, and each
shape is measured ``--rounds`` times.  To check the choice in whole training steps, run ``bench_train.py`` with
``DEPINDUCE_LINEAR_KERNEL=onednn`` and ``=mkl`` (alternating, e.g. with farm-bench).

    python scripts/bench_linear.py                 # 2 threads
    ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 python scripts/bench_linear.py
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from cpu_info import cpu_description

# (batch, length, C_in, C_out): 4,096-token batches of 25-word sentences at width 256 (feed-forward 1,024) and
# of 26-word sentences at width 512 (feed-forward 2,048).
SHAPES = [(160, 25, 256, 1024), (160, 25, 1024, 256), (160, 25, 256, 256),
          (80, 26, 512, 2048), (80, 26, 2048, 512), (80, 26, 512, 512)]


def gflops(kernel: str, shape: tuple[int, int, int, int], steps: int, repeats: int) -> float:
    from depinduce.models.layers import kernels

    batch, length, c_in, c_out = shape
    choose = kernels.onednn_linear_pays
    kernels.onednn_linear_pays = lambda: kernel == "onednn"  # type: ignore[assignment]
    try:
        x = torch.randn(batch, length, c_in, requires_grad=True)
        weight = torch.randn(c_out, c_in, requires_grad=True)
        bias = torch.randn(c_out, requires_grad=True)
        grad = torch.randn(batch, length, c_out)

        def once() -> None:
            kernels.position_linear(x, weight, bias).backward(grad)

        for _ in range(3):
            once()
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(steps):
                once()
            best = min(best, (time.perf_counter() - start) / steps)
    finally:
        kernels.onednn_linear_pays = choose  # type: ignore[assignment]
    return 6 * batch * length * c_in * c_out / best / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    for shape in SHAPES:
        measured: dict[str, list[float]] = {"onednn": [], "mkl": []}
        for round_index in range(args.rounds):
            for kernel in ("onednn", "mkl") if round_index % 2 == 0 else ("mkl", "onednn"):
                measured[kernel].append(round(gflops(kernel, shape, args.steps, args.repeats), 1))
        rows.append({"shape": shape, **measured})
        print(f"B×T {shape[0]}×{shape[1]}, {shape[2]}→{shape[3]}: oneDNN {measured['onednn']} GFLOP/s, "
              f"MKL {measured['mkl']}", flush=True)
    print(json.dumps({**cpu_description(), "threads": args.threads,
                      "cpu_capability": torch.backends.cpu.get_cpu_capability(), "rows": rows}))


if __name__ == "__main__":
    main()
