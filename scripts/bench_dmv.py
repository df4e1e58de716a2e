"""Benchmark the DMV's inside pass: sentences per second at 10, 20 and 40 words, forward alone and forward +
backward (the E-step: expected counts by autograd), on 2 torch threads (and on 1, ``--threads 2,1``).

The model has 45 classes (the Penn tag set) with random tables; each batch holds ``--batch`` sentences of one
length with random classes.  Every figure is the best of several repeats, which filters out noise from other
processes on the machine.  On a busy 2-core machine the 2-thread figures can collapse: with OpenMP's default
(active) wait policy each exp/log kernel then waits about 8 ms for its second thread; ``OMP_WAIT_POLICY=PASSIVE``
avoids that, and the 1-thread rows are printed beside them.

    python scripts/bench_dmv.py [--repeats 5] [--batch 64] [--seed 0] [--threads 2,1]
"""

from __future__ import annotations

import argparse

import torch

from depinduce.data.normalize import Normalization
from depinduce.data.vocab import Vocab
from depinduce.models.dmv import DMV
from depinduce.models.dmv.config import DMVConfig
from timing import best_time

LENGTHS = (10, 20, 40)
CLASSES = 45


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64, help="sentences per inside call")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", default="2,1", help="comma-separated torch thread counts to measure")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    vocab = Vocab([f"T{k}" for k in range(CLASSES)], normalization=Normalization(False, False))
    model = DMV(DMVConfig(view="xpos"), vocab)
    model.set_counts({name: torch.rand_like(table) for name, table in model.tables().items()})
    print(f"DMV inside pass, {CLASSES} classes, batches of {args.batch} sentences, best of {args.repeats}")
    print(f"{'threads':>7} {'words':>6} {'inside sent/s':>14} {'inside+backward sent/s':>23}")
    batches = {n: torch.randint(3, 3 + CLASSES, (args.batch, n)).tolist() for n in LENGTHS}
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for n, rows in batches.items():
            model.expected_counts(rows)  # warm-up
            forward = best_time(lambda: model.log_partition(rows), args.repeats)
            both = best_time(lambda: model.expected_counts(rows), args.repeats)
            print(f"{threads:>7} {n:>6} {args.batch / forward:>14,.0f} {args.batch / both:>23,.0f}")


if __name__ == "__main__":
    main()
