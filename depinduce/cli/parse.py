"""``depinduce parse``: run a model over text or CoNLL-U and write trees to stdout.

Thin: the work is :func:`depinduce.api.load` and :meth:`~depinduce.api.parser.Parser.parse_file`, the Python API's
own parse, so a notebook and the command line give the same bytes.
"""

from __future__ import annotations

import sys

import click

from depinduce.display import say
from depinduce.api.choices import DEFAULT_MAX_WORDS, OUTPUT_FORMATS
from depinduce.cli.decoders import DecoderOption
from depinduce.errors import UsageError



@click.command("parse")
@click.option("--model", "model", default=None, metavar="NAME_OR_RUN_DIR",
              help="A registered backend name (baselines), a training run directory, or 'default' (the bundled "
                   "model). Default: the most recently finished run under ./runs, else the bundled model. For a "
                   "run, stderr says how it ended and its selected dev score, with a warning when that is below "
                   "right-branching's.")
@click.argument("input_path", metavar="[INPUT|-]", default="-")
@click.option("--format", "fmt", type=click.Choice(OUTPUT_FORMATS), default="conllu", show_default=True,
              help="Output format. conllu is MaltEval-safe: syntactic words only, no comment lines. html (one page, a "
                   "figure per sentence) and svg (one picture, sentences stacked) draw the trees.")
@click.option("--full-ud", is_flag=True,
              help="With conllu: the full UD form — # sent_id and # text comments, and the multiword tokens of "
                   "CoNLL-U input; no enhanced graph (DEPS '_', no empty nodes: the input's is gold, not predicted). "
                   "Passes udvalidate --level 2; MaltEval cannot read it.")
@click.option("--decoder", cls=DecoderOption, default=None,
              help="Dependency decoder: single-root maximum spanning tree (mst), projective Eisner, per-word "
                   "argmax, or the model's authors' own decoder (only for that backend; `depinduce models` lists "
                   "them). Default: the run's own (its train.decoder, the bundled model's card), else mst; mst "
                   "too when the run's own does not always give a tree (an argmax: stderr then names it).")
@click.option("--input-format", type=click.Choice(("text", "conllu")), default="text", show_default=True,
              help="Plain text (one sentence per line) or CoNLL-U (tokens and columns kept; HEAD/DEPREL filled).")
@click.option("--tokenized", is_flag=True, help="Text input is already tokenised: split on whitespace only.")
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True,
              help="Sentences per model call.")
@click.option("--device", default="cpu", show_default=True,
              help="Torch device for neural models: auto, cpu, cuda or cuda:N.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for stochastic models (random).")
@click.option("--channel", type=int, default=None, metavar="INT",
              help="For backends with several head channels (probformer): use that channel's heads instead of "
                   "their average; choose it on dev with `depinduce analyze channels`.")
@click.option("--init", "init", default=None, metavar="synTr|empty|FILE",
              help="For refining backends (rngtr): the graph the first pass reads — none (synTr or empty, the "
                   "default: the model parses first, then refines its own output) or any CoNLL-U parse of the "
                   "same sentences, e.g. another model's output.")
@click.option("--iterations", type=int, default=None, metavar="T",
              help="For refining backends: at most T passes after the first (default: the run's own, 3 for RNGTr). "
                   "The first pass reads the initial graph (none, or --init FILE) and each later pass the previous "
                   "pass's argmax graph, so --init FILE is refined by up to 1 + T passes (the authors' code runs "
                   "num_iter_encoder - 1 graph passes: their T = 3 is --iterations 2).")
@click.option("--max-words", type=click.IntRange(min=1), default=DEFAULT_MAX_WORDS, show_default=True,
              help="Refuse a sentence longer than this (in the words the model sees) for models that score every "
                   "pair of words, whose memory grows with the square of the length. The fixed baselines have "
                   "no limit.")
@click.option("--probs", is_flag=True,
              help="Each word's head probability, read from what the model computes (its marginals or head "
                   "distribution; 1 for the baselines): HeadProb=P in the CoNLL-U MISC column (the chosen head, 4 "
                   "decimals), head_probs (the whole distribution over ROOT and the words) in jsonl. Punctuation, "
                   "attached by rule, has none.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def parse_command(model: str | None, input_path: str, fmt: str, full_ud: bool, decoder: str | None,
                  input_format: str, tokenized: bool, batch_size: int, device: str, seed: int, channel: int | None,
                  init: str | None, iterations: int | None, max_words: int, probs: bool, quiet: bool) -> None:
    """Parse INPUT (default: stdin) with a model; trees go to stdout, progress to stderr."""
    # imported here, not above: `depinduce parse --help` must not wait for torch
    from depinduce.api.parser import check_input_options, default_model_choice, load, parse_to

    check_input_options(input_format, tokenized)
    if full_ud and fmt != "conllu":
        raise UsageError(f"--full-ud applies to --format conllu, not {fmt}")
    if model is None:  # said before loading, so a failure to load names the model that was picked
        choice = default_model_choice()
        for warning in choice.warnings:
            say(warning)
        say(choice.reason)
        model = choice.target
    parser = load(model, device=device, seed=seed, channel=channel, iterations=iterations)
    parse_to(parser, input_path, sys.stdout, fmt=fmt, full_ud=full_ud, decoder=decoder, say=say,
             input_format=input_format, batch_size=batch_size, tokenized=tokenized, max_words=max_words,
             progress=not quiet, init=init, probs=probs)


