"""Time one dev evaluation of a model — what training's ``eval_s`` pays at every due step — and, for an EM model
(the DMV), one EM iteration (E-step over the training sentences of at most ``--max-length`` words, M-step).

The dev evaluation is :func:`depinduce.training.evaluation.parsing_metrics` on the data folder's dev.conllu and
dev.trees, with the decoder given (default: the model's own default); its metrics are printed too, so a run
before and after a change shows both the time and that the numbers did not move.  Each figure is the best of
``--repeats`` runs, which filters out noise from other processes on the machine.  Run the old code with
``PYTHONPATH=<checkout of the old commit>`` for a before/after on the same machine.

    python scripts/bench_dev_eval.py --model runs/dmv --data data/ptb [--decoder mst] [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from depinduce.data.punct import sentence_punct_mask
from depinduce.io import read_conllu
from depinduce.models.registry import load_model
from depinduce.pipeline import visible_sentence
from depinduce.training import batching
from depinduce.training.evaluation import DevTreebank, parsing_metrics
from timing import best_time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="run folder, registered name or 'default'")
    parser.add_argument("--data", type=Path, required=True, help="preprocessed data folder (dev.conllu, dev.trees)")
    parser.add_argument("--decoder", default=None, help="default: the model's own default decoder")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-length", type=int, default=10, help="EM training sentences at most this long")
    parser.add_argument("--batch-tokens", type=int, default=4096, help="EM batch size in tokens")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    backend = load_model(args.model)
    backend.eval()
    decoder = args.decoder or backend.default_decoder
    dev = DevTreebank.load(args.data)
    metrics = parsing_metrics(backend, dev, decoder=decoder)  # also the warm-up
    seconds = best_time(lambda: parsing_metrics(backend, dev, decoder=decoder), args.repeats)
    sentences = len(dev.dependencies or dev.trees or [])
    print(f"model {args.model} ({backend.name}), decoder {decoder}, {args.threads} thread(s), "
          f"best of {args.repeats}")
    print(f"dev evaluation: {seconds:.3f} s ({sentences} dev sentences)")
    if backend.capabilities.objective == "em":
        print(f"EM iteration: {em_iteration_seconds(backend, args):.3f} s")
    print("metrics:", json.dumps(metrics, sort_keys=True))


def em_iteration_seconds(backend: Any, args: argparse.Namespace) -> float:
    """One E-step (batched as training batches it) and M-step over the short training sentences."""
    conllu = [visible_sentence(s, sentence_punct_mask(s)) for s in read_conllu(str(args.data / "train.conllu"))]
    rows = backend.classes([s for s in conllu if s.words and len(s) <= args.max_length])
    batches = batching.eval_order([len(r) for r in rows], args.batch_tokens)
    tables = {name: table.detach().clone() for name, table in backend.tables().items()}

    def iteration() -> None:
        counts = {name: torch.zeros_like(table) for name, table in backend.tables().items()}
        for batch in batches:
            for name, value in backend.expected_counts([rows[k] for k in batch])[1].items():
                counts[name] += value
        backend.set_counts(counts)

    try:
        return best_time(iteration, args.repeats)
    finally:
        with torch.no_grad():  # the model as loaded, for nothing after this to see EM's extra steps
            for name, table in tables.items():
                backend.tables()[name].copy_(table)


if __name__ == "__main__":
    main()
