"""Training speed and peak memory of a neural backend (prints its figures; not a test).

One step is exactly what ``depinduce train`` does per batch: the engine's objective for the backend (masked LM:
30% of the real tokens masked, output logits at the masked positions only), forward, backward, gradient clipping
and an Adam step.  Batches hold about ``--batch-tokens`` padded tokens of sentences bucketed by length; the
lengths are drawn from a gamma distribution shaped like PTB without punctuation (mean ≈ 21 words, at most 60)
and the vocabulary has 10,000 words, so the figures do not depend on any data being present.

Each configuration runs in a fresh subprocess, so its peak resident memory (``ru_maxrss``) is its own.  These are
depinduce's figures alone, for the machine at hand; to compare with the authors' code, run both in one run on one
machine with ``scripts/bench_authors.py`` (absolute figures from different machines are not comparable).

    python scripts/bench_train.py                                  # StructFormer, paper (8×512) and small (4×256)
    python scripts/bench_train.py --model structformer --configs small --seconds 20
    python scripts/bench_train.py --model udgn --configs small --seconds 20
    python scripts/bench_train.py --model probformer --batch-tokens 2048 --seconds 60  # both recipes
    python scripts/bench_train.py --configs paper --set recompute_ffn=false
    python scripts/bench_train.py --model udgn --configs small --precision bf16   # train.precision: bf16
    python scripts/bench_train.py --device cuda --precision tf32 --compile reduce-overhead   # train.compile
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import resource
import subprocess
import sys
import time
from typing import Any

import yaml

from cpu_info import machine_description

# model -> configuration -> model_config
CONFIGS: dict[str, dict[str, dict[str, object]]] = {
    "structformer": {
        "paper": {"hidden_size": 512, "n_layers": 8, "n_heads": 8, "ff_size": 2048},
        "small": {"hidden_size": 256, "n_layers": 4, "n_heads": 8, "ff_size": 1024},
    },
    "udgn": {
        "paper": {"hidden_size": 512, "n_layers": 8, "n_heads": 8, "head_size": 128, "parser_layers": 3,
                  "parser_hidden_size": 512},
        "small": {"hidden_size": 256, "n_layers": 4, "n_heads": 8, "head_size": 64, "parser_layers": 3,
                  "parser_hidden_size": 256},
    },
    "prpn": {
        # no runnable CPU reference (the authors' code needs Python 2.7, torch 0.3 and CUDA)
        "paper": {"emb_size": 200, "hidden_size": 400, "n_layers": 2, "n_slots": 15, "lookback": 5},
        "cpu": {"emb_size": 200, "hidden_size": 400, "n_layers": 2, "n_slots": 15, "lookback": 5, "dropout": 0.0,
                "idropout": 0.0},
    },
    "probformer": {
        # recipes/probformer-ptb.yaml and probformer-ptb-cpu.yaml, which both train on 2,048-token batches (pass
        # --batch-tokens 2048 for the recipes' figures)
        "paper": {"d": 384, "n_channels": 16, "n_iter": 5, "decomposition": "uv", "rank": 64,
                  "distance_threshold": 3, "dropout": 0.15, "recompute": True},
        "cpu": {"d": 256, "n_channels": 8, "n_iter": 5, "decomposition": "uv", "rank": 32,
                "distance_threshold": 3, "dropout": 0.0, "recompute": False},
    },
}


def sentence_lengths(count: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [min(60, max(2, round(rng.gammavariate(4.0, 21.0 / 4.0)))) for _ in range(count)]


def bucketed_batches(lengths: list[int], batch_tokens: int, seed: int) -> list[list[int]]:
    """Sentence lengths grouped by similar length, each group's padded size ≤ batch_tokens, groups shuffled."""
    batches: list[list[int]] = []
    current: list[int] = []
    for length in sorted(lengths):
        if current and (len(current) + 1) * length > batch_tokens:
            batches.append(current)
            current = []
        current.append(length)
    if current:
        batches.append(current)
    random.Random(seed).shuffle(batches)
    return batches


def common_shape_batches(batches: list[list[int]], shapes: int) -> list[list[int]]:
    """Only the batches whose static shape (training/shapes.py) is among the ``shapes`` most frequent ones, in
    their order.  Why: a compiled step compiles each new shape once (tens of seconds on a GPU host), so a short
    timed window over every shape would time the compiler; on a few shapes, each compiled during the warm-up
    (which runs every kept batch once), it times the step, as a long run does once every shape has been seen."""
    from collections import Counter

    from depinduce.training.shapes import static_shape

    shape_of = [static_shape(len(lengths), max(lengths)) for lengths in batches]
    kept = {shape for shape, _ in Counter(shape_of).most_common(shapes)}
    return [lengths for lengths, shape in zip(batches, shape_of) if shape in kept]


def random_batch(lengths: list[int], vocab_size: int, generator: Any) -> tuple[Any, Any]:
    """Padded (B, T) random word indices (≥ 4: no specials) and the real-token mask for sentences of ``lengths``."""
    import torch

    width = max(lengths)
    mask = torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]
    tokens = torch.randint(4, vocab_size, (len(lengths), width), generator=generator).masked_fill(~mask, 0)
    return tokens, mask


VOCAB_SIZE = 10_000  # depinduce's three special tokens included


def depinduce_step_function(model_name: str, config: dict[str, Any], precision: str,
                            device: str = "cpu", compile_mode: str = "off",
                            static_shapes: str = "auto") -> tuple[Any, Any]:
    """The backend built at ``config`` over a 10,000-word vocabulary on ``device``, and its training loss for a
    batch exactly as the engine computes it (its objective: inputs prepared on the CPU, padded to a static shape
    where the engine pads them, when compiled, with the loss's index made there on CUDA, then moved to the device;
    under bfloat16 autocast with ``precision: bf16``, which backends that train in float32 only refuse with the
    engine's own one-line error)."""
    import torch

    where = torch.device(device)

    from depinduce.data.vocab import Vocab
    from depinduce.errors import RecipeError
    from depinduce.training.engine import trainable_class
    from depinduce.training.objectives import LossModule, objective_for
    from depinduce.training.precision import autocast, check_precision, set_float32_products
    from depinduce.training.compiled_step import build_step, compiled
    from depinduce.training.config import TrainConfig

    vocab = Vocab([f"w{i}" for i in range(VOCAB_SIZE - 3)])
    model_class = trainable_class(model_name)
    try:
        check_precision(precision, model_name, model_class.mixed_precision, where,
                        lambda line: print(line, file=sys.stderr))
    except RecipeError as error:
        sys.exit(str(error))
    model = model_class.from_config(config, vocab, where="bench").to(where)
    objective = objective_for(model_class.capabilities.objective, mask_rate=0.3, vocab_size=len(vocab))
    objective.check_model(model)
    set_float32_products(precision, where)
    # the engine's step (static_shapes: auto): padded when compiled; on CUDA the exact batch with the loss's index
    # made on the CPU; else the exact batch and loss (training/compiled_step.py)
    train_config = TrainConfig(compile=compile_mode, static_shapes=static_shapes)
    step = build_step(model, objective, LossModule(model, objective), train_config, pad_index=vocab.pad_index,
                      device=where)
    loss_module = step.module
    if compile_mode != "off":  # train.compile: the static-shape step, compiled
        loss_module = compiled(loss_module, compile_mode, where, lambda line: print(line, file=sys.stderr))

    def loss(tokens: torch.Tensor, mask: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        inputs = objective.prepare(tokens, mask, generator=generator)
        if step.pad is not None:
            inputs = step.pad(inputs)
        inputs = {key: value.to(where, non_blocking=True) for key, value in inputs.items()}
        with autocast(precision, where):  # as the engine's training step
            return loss_module(**inputs)[0]

    return model, loss


def training_step(model: Any, loss_of: Any, seed: int) -> Any:
    """The benchmarks' training step for ``model`` and its loss function (``depinduce_step_function`` or the
    authors' side): a random batch of the given sentence lengths, forward, backward, and the engine's update
    (its gradient clipping at 0.25 and its Adam, the defaults of ``train``: lr 3e-4, eps 1e-9, weight decay
    1.2e-6, fused); it returns the batch's real-token count."""
    import torch

    from depinduce.training.config import TrainConfig
    from depinduce.training.optim import build_optimizer, clip_gradients

    model.train()
    params = list(model.parameters())
    optimizer = build_optimizer(params, TrainConfig())
    generator = torch.Generator().manual_seed(seed)

    def step(lengths: list[int]) -> int:
        tokens, mask = random_batch(lengths, VOCAB_SIZE, generator)
        loss_of(tokens, mask, generator).backward()
        clip_gradients(params, 0.25)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)  # before the next forward: gradients need not outlive the step
        return int(mask.sum())

    return step


def worker(model_name: str, model_config: dict[str, Any], threads: int, seconds: float, batch_tokens: int,
           seed: int, precision: str = "fp32", device: str = "cpu", compile_mode: str = "off",
           shapes: int | None = None, static_shapes: str = "auto") -> dict[str, object]:
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    where = torch.device(device)
    model, loss_of = depinduce_step_function(model_name, model_config, precision, device, compile_mode,
                                             static_shapes)
    batches = bucketed_batches(sentence_lengths(20_000, seed), batch_tokens, seed)
    if shapes is not None:
        batches = common_shape_batches(batches, shapes)
    step = training_step(model, loss_of, seed)
    warm = 2 if compile_mode == "off" else 8  # warm-up: allocator, oneDNN kernels (compiled: the first shapes)
    if shapes is not None and compile_mode != "off":  # every kept batch once: each shape (and count of masked
        warm = len(batches)                            # positions) compiled before the clock starts
    synchronize(where)
    warm_start = time.perf_counter()
    for lengths in batches[:warm]:
        step(lengths)
    synchronize(where)
    warm_seconds = time.perf_counter() - warm_start
    words = 0
    steps = 0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    for lengths in itertools.cycle(batches[warm:] or batches):  # a fast device runs through them: again
        words += step(lengths)
        steps += 1
        if time.perf_counter() - start > seconds:
            break
    synchronize(where)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "threads": threads,
        "precision": precision,
        "compile": compile_mode,
        "static_shapes": static_shapes,
        "shapes": shapes,
        "warmup_steps": warm,
        "warmup_s": round(warm_seconds, 1),  # compilation included
        "steps": steps,
        "tokens": words,
        "seconds": round(elapsed, 2),
        "tokens_per_s": round(words / elapsed, 1),
        # CPU time (all threads, user + system): a figure that other processes on the machine disturb less.
        "cpu_seconds": round(after.ru_utime - usage.ru_utime + after.ru_stime - usage.ru_stime, 2),
        "peak_rss_gb": round(after.ru_maxrss / 1024**2, 3),
        **device_peak_memory(where),
        "parameters_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
    }


def synchronize(device: Any) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously: a host clock read before this would stop
    while kernels are still running)."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_peak_memory(device: Any) -> dict[str, float]:
    """On CUDA, the peak of the tensors the process held on the GPU (``max_memory_allocated``) and of what torch's
    caching allocator reserved for them (``max_memory_reserved``, what ``nvidia-smi`` shows as used), in GiB; on
    the CPU nothing (the resident peak is the figure there)."""
    import torch

    if device.type != "cuda":
        return {}
    return {"peak_gpu_gb": round(torch.cuda.max_memory_allocated(device) / 1024**3, 3),
            "peak_gpu_reserved_gb": round(torch.cuda.max_memory_reserved(device) / 1024**3, 3)}


def parse_sets(items: list[str]) -> dict[str, object]:
    values: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            sys.exit(f"--set {item!r}: expected key=value")
        values[key] = yaml.safe_load(value)
    return values


def chosen_configs(model: str, names: list[str] | None) -> list[str]:
    """The configurations named on the command line (all of the model's when none), or exit naming the unknown."""
    table = CONFIGS[model]
    chosen = names or list(table)
    unknown = [name for name in chosen if name not in table]
    if unknown:
        sys.exit(f"unknown configuration(s) {unknown} for {model}; known: {sorted(table)}")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(CONFIGS), default="structformer")
    parser.add_argument("--configs", nargs="+", help="named configurations of the model (default: all)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a model_config key in every configuration")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=60.0, help="timed training per configuration")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="fp32",
                        help="train.precision: bf16 runs each forward pass under bfloat16 autocast; tf32 (CUDA) "
                             "rounds float32 products' operands to TF32")
    parser.add_argument("--compile", choices=("off", "default", "reduce-overhead", "cudagraphs"), default="off",
                        help="train.compile: the static-shape step under torch.compile")
    parser.add_argument("--static-shapes", choices=("auto", "on", "off"), default="auto",
                        help="train.static_shapes (auto: padded when compiled; on: padded eager steps too)")
    parser.add_argument("--shapes", type=int, help="time only the batches of the K most frequent static shapes "
                        "(compiled: each compiled before the clock starts); default: every batch")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N] (as depinduce train --device)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # JSON model_config: run one configuration here
    args = parser.parse_args()

    if args.worker:
        print(json.dumps(worker(args.model, json.loads(args.worker), args.threads, args.seconds,
                                args.batch_tokens, args.seed, args.precision, args.device, args.compile,
                                args.shapes, args.static_shapes)))
        return
    table = CONFIGS[args.model]
    names = chosen_configs(args.model, args.configs)
    for name in names:
        model_config = {**table[name], **parse_sets(args.set)}
        command = [sys.executable, __file__, "--model", args.model, "--worker", json.dumps(model_config),
                   "--threads", str(args.threads), "--seconds", str(args.seconds),
                   "--batch-tokens", str(args.batch_tokens), "--seed", str(args.seed),
                   "--precision", args.precision, "--device", args.device, "--compile", args.compile,
                   "--static-shapes", args.static_shapes]
        if args.shapes is not None:
            command += ["--shapes", str(args.shapes)]
        finished = subprocess.run(command, capture_output=True, text=True)
        if finished.returncode != 0:
            sys.exit(f"{args.model}/{name}: the benchmark worker failed (exit {finished.returncode}):\n"
                     f"{finished.stderr[-2000:]}")
        result = {"model": args.model, "config": name, **machine_description(args.device),
                  **json.loads(finished.stdout)}
        print(json.dumps(result))


if __name__ == "__main__":
    main()
