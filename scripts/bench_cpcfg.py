"""Benchmark the compound PCFG's inside pass: sentences per second at 10, 20 and 40 words, the chart alone and the
chart + backward (what a training step differentiates), and whole training steps (networks, ELBO, backward,
clipping, Adam) in sentences/s and tokens/s — for the compound and the neural PCFG at the CPU recipe's size and
the paper's, beside the DMV's inside pass (45 classes) for comparison.  2 torch threads by default.

Grammars are random (softmax-normalised random scores; compound: one per sentence); each batch holds
``--batch`` sentences of one length.  Every figure is the best of ``--repeats`` runs, which filters out noise
from other processes on the machine.  The other neural backends' training tokens/s are printed by
``scripts/bench_train.py`` (README: about 2,000–3,000 tokens/s at their CPU sizes on the README's CPU).
On a busy 2-core machine the 2-thread figures can collapse (OpenMP's active wait policy: each small kernel waits
for its second thread); ``OMP_WAIT_POLICY=PASSIVE`` avoids that, and ``--threads 2,1`` prints 1-thread rows
beside them.

    python scripts/bench_cpcfg.py [--threads 2] [--batch 8] [--repeats 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_info import cpu_description  # noqa: E402
from timing import best_time  # noqa: E402

from depinduce.data.normalize import Normalization  # noqa: E402
from depinduce.data.vocab import Vocab  # noqa: E402
from depinduce.models.cpcfg import CPCFG  # noqa: E402
from depinduce.models.cpcfg.chart import Grammar, inside  # noqa: E402
from depinduce.models.cpcfg.config import CPCFGConfig  # noqa: E402
from depinduce.models.dmv import DMV  # noqa: E402
from depinduce.models.dmv.config import DMVConfig  # noqa: E402
from depinduce.training.objectives import objective_for  # noqa: E402

LENGTHS = (10, 20, 40)
VOCAB = 10_000
SIZES = {  # (nt, t, state_dim, z_dim, word_dim, lstm_dim)
    "cpu recipe": dict(nt=15, t=30, state_dim=128, z_dim=32, word_dim=128, lstm_dim=128),
    "paper": dict(nt=30, t=60, state_dim=256, z_dim=64, word_dim=512, lstm_dim=512),
}


def random_grammar(nt: int, t: int, batch: int, n: int, groups: int) -> Grammar:
    symbols = nt + t
    root = torch.log_softmax(torch.randn(groups, nt), -1)
    rules = torch.log_softmax(torch.randn(groups, nt, symbols * symbols), -1).view(groups, nt, symbols, symbols)
    terms = torch.log_softmax(torch.randn(batch, n, t), -1) - 6.0  # about log(1/|V|) per word
    return Grammar(root, rules, terms, torch.full((batch,), n))


def chart_rates(nt: int, t: int, batch: int, n: int, compound: bool, repeats: int) -> tuple[float, float]:
    """Sentences/s of the inside pass alone and with the backward pass to the rule, root and term scores."""
    grammar = random_grammar(nt, t, batch, n, batch if compound else 1)
    leaves = [x.requires_grad_() for x in (grammar.root, grammar.rules, grammar.terms)]

    def forward() -> None:
        with torch.no_grad():
            inside(grammar)

    def both() -> None:
        torch.autograd.grad(inside(grammar).sum(), leaves)

    both()  # warm-up
    return batch / best_time(forward, repeats), batch / best_time(both, repeats)


def step_rate(size: dict[str, int], compound: bool, batch: int, n: int, repeats: int) -> float:
    """Sentences/s of whole training steps: ELBO, backward, clipping at 3, Adam."""
    vocab = Vocab([f"w{i}" for i in range(VOCAB)], normalization=Normalization(False, False))
    model = CPCFG(CPCFGConfig(compound=compound, **size), vocab)
    model.train()
    objective = objective_for("likelihood", mask_rate=0.3, vocab_size=len(vocab))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.75, 0.999))
    tokens = torch.randint(3, len(vocab), (batch, n))
    mask = torch.ones_like(tokens, dtype=torch.bool)

    def step() -> None:
        out = objective.compute(model, tokens=tokens, mask=mask)
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 3.0)
        optimizer.step()

    step()  # warm-up
    return batch / best_time(step, repeats)


def dmv_rates(batch: int, n: int, repeats: int) -> tuple[float, float]:
    classes = 45
    vocab = Vocab([f"T{k}" for k in range(classes)], normalization=Normalization(False, False))
    model = DMV(DMVConfig(view="xpos"), vocab)
    model.set_counts({name: torch.rand_like(table) for name, table in model.tables().items()})
    rows = torch.randint(3, 3 + classes, (batch, n)).tolist()
    model.expected_counts(rows)  # warm-up
    return (batch / best_time(lambda: model.log_partition(rows), repeats),
            batch / best_time(lambda: model.expected_counts(rows), repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="2", help="comma-separated torch thread counts to measure")
    parser.add_argument("--batch", type=int, default=8, help="sentences per batch")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(json.dumps({**cpu_description(), "torch": torch.__version__}))
    print(f"batches of {args.batch} sentences of one length, best of {args.repeats}; sentences/s "
          f"(training steps also tokens/s); vocabulary {VOCAB:,} words")
    print(f"{'threads':>7} {'model':<36} {'words':>5} {'inside':>9} {'inside+bwd':>11} {'train step':>11} "
          f"{'train tok/s':>12}")
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        torch.manual_seed(args.seed)
        for size_name, size in SIZES.items():
            for compound in (True, False):
                label = f"{'compound' if compound else 'neural'} PCFG, {size_name} ({size['nt']}/{size['t']})"
                for n in LENGTHS:
                    forward, both = chart_rates(size["nt"], size["t"], args.batch, n, compound, args.repeats)
                    steps = step_rate(size, compound, args.batch, n, args.repeats)
                    print(f"{threads:>7} {label:<36} {n:>5} {forward:>9,.0f} {both:>11,.0f} {steps:>11,.1f} "
                          f"{steps * n:>12,.0f}", flush=True)
        for n in LENGTHS:
            forward, both = dmv_rates(args.batch, n, args.repeats)
            print(f"{threads:>7} {'DMV, 45 classes':<36} {n:>5} {forward:>9,.0f} {both:>11,.0f}", flush=True)


if __name__ == "__main__":
    main()
