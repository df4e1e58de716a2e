"""Micro-benchmark of StructFormer training speed and peak memory (prints its figures; not a test).

One training step = forward + backward + gradient clipping + Adam step on a masked-LM batch: 30% of the real
tokens masked, output logits only at the masked positions (as the engine does).  Batches hold about
``--batch-tokens`` padded tokens of sentences bucketed by length; the lengths are drawn from a gamma
distribution shaped like PTB without punctuation (mean ≈ 21 words, at most 60), the vocabulary has 10,000 words.

Each configuration runs in a fresh subprocess so that its peak resident memory (``ru_maxrss``) is its own.

    python scripts/bench_structformer.py                      # paper (8×512) and small (4×256), 2 threads
    python scripts/bench_structformer.py --configs small --seconds 20
    python scripts/bench_structformer.py --parent-only        # the parent distribution alone, fast vs naive
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time

CONFIGS = {
    "paper": {"hidden_size": 512, "n_layers": 8, "n_heads": 8, "ff_size": 2048},
    "small": {"hidden_size": 256, "n_layers": 4, "n_heads": 8, "ff_size": 1024},
}
HEAP_MODES = ("default", "release", "tuned")
TARGETS = {"paper": (630, 2.1), "small": (3400, 1.3)}  # tokens/s at least, peak GB at most (issue 4)


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


def worker(name: str, threads: int, seconds: float, batch_tokens: int, seed: int, heap: str) -> dict[str, object]:
    import torch

    from depinduce.data.vocab import Vocab
    from depinduce.models.structformer import StructFormer, StructFormerConfig
    from depinduce.models.structformer.memory import keep_freed_memory_in_heap, release_free_heap

    if heap == "tuned":
        keep_freed_memory_in_heap()
    release = heap != "default"

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    vocab = Vocab([f"w{i}" for i in range(10_000 - 3)])
    model = StructFormer(StructFormerConfig(**CONFIGS[name]), vocab)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4, eps=1e-9, weight_decay=1.2e-6)
    batches = bucketed_batches(sentence_lengths(20_000, seed), batch_tokens, seed)
    generator = torch.Generator().manual_seed(seed)

    def step(lengths: list[int]) -> int:
        width = max(lengths)
        mask = torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]
        tokens = torch.randint(3, len(vocab), (len(lengths), width), generator=generator).masked_fill(~mask, 0)
        masked = mask & (torch.rand(mask.shape, generator=generator) < 0.3)
        inputs = tokens.masked_fill(masked, vocab.mask_index)
        hidden = model.encode(inputs, mask)
        loss = torch.nn.functional.cross_entropy(model.output_logits(hidden[masked]), tokens[masked])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)  # before the next forward: gradients need not outlive the step
        if release:
            release_free_heap()
        return int(mask.sum())

    for lengths in batches[:2]:  # warm-up: allocator, oneDNN kernels
        step(lengths)
    words = 0
    steps = 0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    for lengths in batches[2:]:
        words += step(lengths)
        steps += 1
        if time.perf_counter() - start > seconds:
            break
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    peak_kb = after.ru_maxrss
    return {
        "config": name,
        "threads": threads,
        "heap": heap,
        "steps": steps,
        "tokens": words,
        "seconds": round(elapsed, 2),
        "tokens_per_s": round(words / elapsed, 1),
        # CPU time (all threads, user + system): a figure that other processes on the machine disturb less.
        "cpu_seconds": round(after.ru_utime - usage.ru_utime + after.ru_stime - usage.ru_stime, 2),
        "system_seconds": round(after.ru_stime - usage.ru_stime, 2),
        "peak_rss_gb": round(peak_kb / 1024**2, 3),
        "parameters_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
    }


def parent_only(threads: int) -> None:
    """Time the O(n³) parent distribution (forward + backward) against a dense O(n⁴) contraction."""
    import torch

    from depinduce.models.structformer.parent import parent_distribution, span_boundaries
    from depinduce.models.structformer.parser import BIG

    torch.set_num_threads(threads)
    for width in (20, 40, 60):
        batch = 4096 // width
        mask = torch.ones(batch, width, dtype=torch.bool)
        distance = torch.randn(batch, width).index_fill_(1, torch.tensor([width - 1]), BIG).requires_grad_()
        height = torch.randn(batch, width, requires_grad=True)
        s = torch.ones(())

        def fast() -> None:
            parent, root = parent_distribution(distance, height, mask, s, s)
            (parent.sum() + root.sum()).backward()

        def dense() -> None:
            p_left, p_right = span_boundaries(distance.double(), height.double(), s.double())
            index = torch.arange(width)
            inside = (index[:, None, None] <= index[None, None, :]) & (index[None, None, :] <= index[None, :, None])
            logits = height.double()[:, None, None, :].masked_fill(~inside, -1e9)
            parent = torch.einsum("bil,bir,blrj->bij", p_left, p_right, logits.softmax(-1))
            parent.sum().backward()

        row = {"width": width, "batch": batch}
        for label, fn in (("fast_ms", fast), ("dense_ms", dense)):
            fn()
            start = time.perf_counter()
            for _ in range(3):
                fn()
            row[label] = round((time.perf_counter() - start) / 3 * 1000, 1)
        print(json.dumps(row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=["paper", "small"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=60.0, help="timed training per configuration")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parent-only", action="store_true")
    parser.add_argument("--heap", choices=HEAP_MODES, default="release",
                        help="glibc heap handling (depinduce/models/structformer/memory.py): 'default' leaves it "
                             "alone, 'release' calls release_free_heap() after each step, 'tuned' also calls "
                             "keep_freed_memory_in_heap() at start")
    parser.add_argument("--worker", choices=sorted(CONFIGS), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.parent_only:
        parent_only(args.threads)
        return
    if args.worker:
        print(json.dumps(worker(args.worker, args.threads, args.seconds, args.batch_tokens, args.seed,
                                args.heap)))
        return
    for name in args.configs:
        command = [sys.executable, __file__, "--worker", name, "--threads", str(args.threads),
                   "--seconds", str(args.seconds), "--batch-tokens", str(args.batch_tokens), "--seed", str(args.seed)]
        command += ["--heap", args.heap]
        finished = subprocess.run(command, capture_output=True, text=True)
        if finished.returncode != 0:
            sys.exit(f"{name}: the benchmark worker failed (exit {finished.returncode}):\n{finished.stderr[-2000:]}")
        result = json.loads(finished.stdout)
        speed, memory = TARGETS[name]
        result["target"] = f">= {speed} tokens/s, <= {memory} GB"
        result["meets_target"] = result["tokens_per_s"] >= speed and result["peak_rss_gb"] <= memory
        print(json.dumps(result))


if __name__ == "__main__":
    main()
