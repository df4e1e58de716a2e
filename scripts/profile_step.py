"""Where a training step's time goes, depinduce beside the authors' code, and the speed ratio that bounds (prints
figures; not a test).

Each side runs ``bench_authors.py``'s step (the same batches, masking, clipping and Adam) in a fresh process: two
warm-up steps, then ``--steps`` steps under ``torch.profiler``.  The operators' own CPU time is summed into the
groups that decide the ratio: the LSTMs (oneDNN's RNN layer, forward and backward), the linear maps (``mm`` and
``addmm``, MKL's sgemm; oneDNN's convolutions, which depinduce routes its linear maps to on AVX-512 CPUs), the
batched products (``bmm``: attention-like pair products), the output layer's separate log-softmax (the authors'
side; depinduce's runs inside its fused output loss) and everything else.

``bound`` is the authors' profiled time over depinduce's LSTM and linear-map time: the speed ratio depinduce
could reach if everything else in its step took no time at all.  Where the two sides do the same LSTM and
linear-map arithmetic in the same kernels (UDGN), no implementation of that arithmetic gets past it on the CPU
at hand.  The profiler adds a few per cent to both sides; read ``bench_authors.py`` for the ratio itself.

    python scripts/profile_step.py --model udgn --authors /tmp/UDGN --configs small --batch-tokens 2048
    python scripts/profile_step.py --model udgn --authors /tmp/UDGN --configs small --batch-tokens 2048 --precision bf16
    python scripts/profile_step.py --model structformer --authors /tmp/google-research --configs small
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_authors import (  # noqa: E402
    CONFIGS, SHARED_DEFAULTS, add_side_by_side_arguments, authors_step_function, run_side, worker_command,
)
from bench_train import (  # noqa: E402
    bucketed_batches, chosen_configs, depinduce_step_function, parse_sets, sentence_lengths, training_step,
)
from cpu_info import machine_description  # noqa: E402

# operator → group; operators not named here are "other"
GROUPS = {
    "aten::mkldnn_rnn_layer": "lstm",
    "aten::mkldnn_rnn_layer_backward": "lstm",
    "aten::mm": "linear_maps",
    "aten::addmm": "linear_maps",
    "aten::mkldnn_convolution": "linear_maps",
    "aten::convolution_backward": "linear_maps",
    "aten::bmm": "batched_products",
    "aten::_log_softmax": "log_softmax",
    "aten::_log_softmax_backward_data": "log_softmax",
}


def profile_side(side: str, model_name: str, config: dict[str, Any], authors: Path | None, threads: int,
                 steps: int, batch_tokens: int, seed: int, precision: str) -> dict[str, Any]:
    """Seconds of each group over ``steps`` profiled steps, the wall time and the top operators."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    if side == "depinduce":
        model, loss_of = depinduce_step_function(model_name, config, precision)
    else:
        assert authors is not None
        model, loss_of = authors_step_function(model_name, config, authors)
    step = training_step(model, loss_of, seed)
    batches = bucketed_batches(sentence_lengths(20_000, seed), batch_tokens, seed)
    for lengths in batches[:2]:
        step(lengths)
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        start = time.perf_counter()
        tokens = sum(step(lengths) for lengths in batches[2:2 + steps])
        wall = time.perf_counter() - start
    groups = dict.fromkeys(["lstm", "linear_maps", "batched_products", "log_softmax", "other"], 0.0)
    operators = profiler.key_averages()
    for operator in operators:
        groups[GROUPS.get(operator.key, "other")] += operator.self_cpu_time_total / 1e6
    top = sorted(operators, key=lambda o: o.self_cpu_time_total, reverse=True)[:8]
    return {"side": side, "wall_s": round(wall, 3), "tokens": tokens, "profiled_s": round(sum(groups.values()), 3),
            **{name: round(seconds, 3) for name, seconds in groups.items()},
            "top_operators": {o.key: round(o.self_cpu_time_total / 1e6, 3) for o in top}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_side_by_side_arguments(parser, ["udgn", "structformer"], 8, "profiled steps (after 2 warm-up steps)")
    args = parser.parse_args()

    if args.worker:
        print(json.dumps(profile_side(args.worker, args.model, json.loads(args.worker_config), args.authors,
                                      args.threads, args.steps, args.batch_tokens, args.seed, args.precision)))
        return
    for name in chosen_configs(args.model, args.configs):
        shared = {**CONFIGS[args.model][name], **SHARED_DEFAULTS[args.model], **parse_sets(args.set)}
        sides = {}
        for side, config in (("authors", shared), ("depinduce", {**shared, **parse_sets(args.depinduce_set)})):
            sides[side] = run_side(worker_command(__file__, args, side, config), side)
        fixed = sides["depinduce"]["lstm"] + sides["depinduce"]["linear_maps"]
        print(json.dumps({"model": args.model, "config": name, "precision": args.precision,
                          **machine_description("cpu"), **sides,
                          "speed_ratio_profiled": round(sides["authors"]["wall_s"] / sides["depinduce"]["wall_s"], 3),
                          "bound": round(sides["authors"]["profiled_s"] / fixed, 3) if fixed else None}))


if __name__ == "__main__":
    main()
