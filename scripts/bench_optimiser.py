"""The optimiser update's time, torch's fused Adam against its default (prints its figures; not a test).

The engine's update after backward (``depinduce/training/optim.py``): the gradient clipping at the recipe's
``clip`` and Adam's step, over the parameters of a backend built at its paper recipe's ``model_config``
(``scripts/count_ops.py`` builds it), with random gradients.  ``fused_adam: true`` (the default) and ``false``
(torch's default: a loop over the parameters on the CPU) alternate, ``--rounds`` times ``--updates`` updates
each, in one process; the figures are the medians per update and their ratio, with the CPU named.

    python scripts/bench_optimiser.py                            # StructFormer and UDGN, 2 threads
    python scripts/bench_optimiser.py --models udgn --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from count_ops import RECIPES, build
from cpu_info import cpu_description


def update_seconds(model_name: str, fused: bool, updates: int) -> tuple[Any, Any]:
    """A timer of ``updates`` engine updates for the backend's parameters, and the number of parameters."""
    import torch

    from depinduce.training.optim import build_optimizer, clip_gradients

    model, _, train = build(model_name, torch.device("cpu"), fused_adam=fused)
    params = [p for p in model.parameters() if p.requires_grad]
    generator = torch.Generator().manual_seed(0)
    for p in params:
        p.grad = torch.randn(p.shape, generator=generator) * 1e-3
    optimizer = build_optimizer(params, train)

    def run() -> float:
        start = time.perf_counter()
        for _ in range(updates):
            clip_gradients(params, train.optimiser.clip)
            optimizer.step()
        return (time.perf_counter() - start) / updates

    run()  # warm-up: the optimiser's state is allocated at the first step
    return run, sum(p.numel() for p in params)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", choices=sorted(RECIPES), default=["structformer", "udgn"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--updates", type=int, default=10)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's package, run from anywhere
    import torch

    torch.set_num_threads(args.threads)
    print(f"{cpu_description()}, torch {torch.__version__}, {args.threads} threads")
    print(f"{'backend':<13} {'parameters':>11} {'fused ms':>9} {'default ms':>11} {'fused/default':>14}")
    for name in args.models:
        fused, count = update_seconds(name, True, args.updates)
        default, _ = update_seconds(name, False, args.updates)
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.rounds):  # alternating
            times[True].append(fused())
            times[False].append(default())
        a, b = statistics.median(times[True]) * 1e3, statistics.median(times[False]) * 1e3
        print(f"{name:<13} {count:>11,} {a:>9.1f} {b:>11.1f} {a / b:>14.2f}", flush=True)


if __name__ == "__main__":
    main()
