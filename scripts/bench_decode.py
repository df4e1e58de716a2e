"""Benchmark the tree decoders: sentences per second of our Chu-Liu/Edmonds and Eisner on random scores.

Prints, for 10/25/50/100-word sentences: MST sentences/s, the C++ ``ufal.chu_liu_edmonds`` on the same
matrices in the same run (it has no single-root constraint; a note is printed when it is not installed), the
ratio of our time to ufal's, and Eisner one sentence at a time and in padded batches; then the time of one
200-word sentence for MST and Eisner.  Scores are i.i.d. standard normal, the hard case for Chu-Liu/Edmonds
(about n/5 nested cycle contractions); trained models' log-probabilities usually decode faster.  Every figure
is the best of several repeats, which filters out noise from other processes on the machine.

    python scripts/bench_decode.py [--repeats 5] [--batch 32] [--seed 0]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
import torch

from depinduce.structures.eisner import eisner, eisner_single
from depinduce.structures.mst import chu_liu_edmonds
from timing import best_time

LENGTHS = (10, 25, 50, 100)


def ufal_decoder() -> Callable[[np.ndarray], object] | None:
    try:
        from ufal.chu_liu_edmonds import chu_liu_edmonds as ufal_cle
    except ImportError:
        return None
    return ufal_cle


def for_ufal(S: np.ndarray) -> np.ndarray:
    """ufal's convention is ours ([dependent][head], 0 = ROOT); it wants NaN where there is no arc."""
    prepared = S.copy()
    np.fill_diagonal(prepared, np.nan)
    prepared[0] = np.nan
    return prepared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32, help="sentences per batched Eisner call")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(2)
    rng = np.random.default_rng(args.seed)
    ufal_cle = ufal_decoder()

    print(f"random N(0,1) scores; best of {args.repeats} repeats; torch threads = {torch.get_num_threads()}")
    if ufal_cle is None:
        print("note: ufal.chu_liu_edmonds is not installed (pip install ufal.chu_liu_edmonds): no comparison")
    header = (
        f"{'words':>5} | {'MST sent/s':>10} | {'ufal sent/s':>11} | {'ours/ufal time':>14} | "
        f"{'Eisner sent/s':>13} | {'Eisner batched sent/s':>21}"
    )
    print(header)
    print("-" * len(header))
    for n in LENGTHS:
        count = max(20, 4000 // n)
        matrices = [rng.standard_normal((n + 1, n + 1)) for _ in range(count)]
        mst_s = best_time(lambda: [chu_liu_edmonds(S) for S in matrices], args.repeats) / count
        if ufal_cle is not None:
            prepared = [for_ufal(S) for S in matrices]
            ufal_s = best_time(lambda: [ufal_cle(S) for S in prepared], args.repeats) / count
            ufal_cols = f"{1 / ufal_s:>11,.0f} | {mst_s / ufal_s:>14.2f}"
        else:
            ufal_cols = f"{'-':>11} | {'-':>14}"
        singles = [torch.tensor(S) for S in matrices[: min(count, 20)]]
        eisner_s = best_time(lambda: [eisner_single(S) for S in singles], args.repeats) / len(singles)
        batch = torch.tensor(np.stack([matrices[k % count] for k in range(args.batch)]))
        lengths = [n] * args.batch
        batched_s = best_time(lambda: eisner(batch, lengths), args.repeats) / args.batch
        print(f"{n:>5} | {1 / mst_s:>10,.0f} | {ufal_cols} | {1 / eisner_s:>13,.0f} | {1 / batched_s:>21,.0f}")

    long_sentence = rng.standard_normal((201, 201))
    mst_long = best_time(lambda: chu_liu_edmonds(long_sentence), args.repeats)
    eisner_long = best_time(lambda: eisner_single(torch.tensor(long_sentence)), args.repeats)
    line = f"one 200-word sentence: MST {mst_long * 1e3:.2f} ms, Eisner {eisner_long * 1e3:.1f} ms"
    if ufal_cle is not None:
        ufal_long = best_time(lambda: ufal_cle(for_ufal(long_sentence)), args.repeats)
        line += f" (ufal MST {ufal_long * 1e3:.2f} ms)"
    print(line)


if __name__ == "__main__":
    main()
