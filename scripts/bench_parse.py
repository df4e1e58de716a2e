"""Time ``depinduce parse`` (the whole pipeline: scoring, decoding, labels) on a CoNLL-U file and print
sentences/s and tokens/s.  Works for any model; for refining backends (RNGTr) ``--iterations`` sets T and
``--init FILE`` refines a given parse, and the number of passes actually run (early stop) is reported.

    python scripts/bench_parse.py --model runs/rngtr data/ewt/dev.conllu --threads 2 --iterations 3
"""

from __future__ import annotations

import argparse
import time

import torch

from depinduce.io import read_sentences
from depinduce.io.initial_graphs import read_initial_parse
from depinduce.models.registry import load_model
from depinduce.pipeline import OUTPUT_FORMATS, ParseRequest, parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="run directory or registered backend name")
    parser.add_argument("input", help="CoNLL-U file to parse")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--decoder", default=None, help="default: the run's own, as `depinduce parse`")
    parser.add_argument("--format", dest="fmt", default="conllu", choices=OUTPUT_FORMATS)
    parser.add_argument("--iterations", type=int, default=None)
    parser.add_argument("--init", default=None, help="CoNLL-U parse of the same sentences to refine")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    backend = load_model(args.model)
    if args.iterations is not None:
        backend.set_iterations(args.iterations)
    sentences = read_sentences(args.input, fmt="conllu")
    init = read_initial_parse(args.init, sentences) if args.init else None
    decoder = args.decoder or backend.default_decoder
    request = ParseRequest(fmt=args.fmt, decoder=decoder, batch_size=args.batch_size)
    passes: list[int] = []
    started = time.perf_counter()
    for k in range(0, len(sentences), args.batch_size):
        batch = sentences[k : k + args.batch_size]
        list(parse(batch, backend, request, progress=False,
                   init=None if init is None else init[k : k + args.batch_size]))
        if hasattr(backend, "last_passes"):
            passes.append(backend.last_passes)
    seconds = time.perf_counter() - started
    tokens = sum(len(s.words) for s in sentences)
    print(f"model {args.model}: {len(sentences)} sentences, {tokens} tokens in {seconds:.1f} s on "
          f"{args.threads} thread(s), batch {args.batch_size}, decoder {decoder}, {args.fmt}")
    print(f"{len(sentences) / seconds:.1f} sentences/s, {tokens / seconds:,.0f} tokens/s")
    if passes:
        print(f"passes per batch: mean {sum(passes) / len(passes):.2f}, max {max(passes)} "
              f"(iterations {args.iterations if args.iterations is not None else 'as trained'})")


if __name__ == "__main__":
    main()
