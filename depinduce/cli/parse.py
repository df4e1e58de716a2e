"""``depinduce parse``: run a model over text or CoNLL-U and write trees to stdout."""

from __future__ import annotations

import sys

import click

from depinduce.errors import DepinduceError
from depinduce.io import read_sentences, write_sentences
from depinduce.io.initial_graphs import read_initial_parse
from depinduce.io.lines import display_name
from depinduce.models.bundled import default_model_choice
from depinduce.models.registry import load_model
from depinduce.parsing import (
    DEFAULT_MAX_WORDS, OUTPUT_FORMATS, ParseRequest, check_refines, check_request, check_whole_sentence_input,
    describe_blank_lines, needs_conllu_message, parse, read_text,
)
from depinduce.cli.decoders import DecoderOption


@click.command("parse")
@click.option("--model", "model", default=None, metavar="NAME_OR_RUN_DIR",
              help="A registered backend name (baselines), a training run directory, or 'default' (the bundled "
                   "model). Default: the most recently finished run under ./runs, else the bundled model.")
@click.argument("input_path", metavar="[INPUT|-]", default="-")
@click.option("--format", "fmt", type=click.Choice(OUTPUT_FORMATS), default="conllu", show_default=True,
              help="Output format. conllu is MaltEval-safe: syntactic words only, no comment lines.")
@click.option("--full-ud", is_flag=True,
              help="With conllu: the full UD form — # sent_id and # text comments, and the multiword tokens and "
                   "empty nodes of CoNLL-U input (passes udvalidate --level 2; MaltEval cannot read it).")
@click.option("--decoder", cls=DecoderOption, default=None,
              help="Dependency decoder: single-root maximum spanning tree (mst), projective Eisner, per-word "
                   "argmax, or the model's authors' own decoder (only for that backend; `depinduce models` lists "
                   "them). Default: the run's own (its train.decoder, the bundled model's card), else mst.")
@click.option("--input-format", type=click.Choice(("text", "conllu")), default="text", show_default=True,
              help="Plain text (one sentence per line) or CoNLL-U (tokens and columns kept; HEAD/DEPREL filled).")
@click.option("--tokenized", is_flag=True, help="Text input is already tokenised: split on whitespace only.")
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True,
              help="Sentences per model call.")
@click.option("--device", default="cpu", show_default=True, help="Torch device for neural models.")
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
@click.option("--quiet", is_flag=True, help="No progress bar.")
def parse_command(model: str | None, input_path: str, fmt: str, full_ud: bool, decoder: str | None,
                  input_format: str, tokenized: bool, batch_size: int, device: str, seed: int, channel: int | None,
                  init: str | None, iterations: int | None, max_words: int, quiet: bool) -> None:
    """Parse INPUT (default: stdin) with a model; trees go to stdout, progress to stderr."""
    if tokenized and input_format != "text":
        raise DepinduceError("--tokenized applies to text input only; CoNLL-U input is always tokenised")
    if full_ud and fmt != "conllu":
        raise DepinduceError(f"--full-ud applies to --format conllu, not {fmt}")
    if model is None:
        choice = default_model_choice()
        click.echo(choice.reason, err=True)
        model = choice.target
    backend = load_model(model, device=device, seed=seed)
    if channel is not None:
        backend.select_channel(channel)
    if iterations is not None:
        backend.set_iterations(iterations)
    if init is not None:
        check_refines(backend)
    request = ParseRequest(fmt=fmt, decoder=decoder or backend.default_decoder, batch_size=batch_size, max_words=max_words,
                           source=display_name(input_path))
    check_request(backend, request)
    if backend.capabilities.whole_sentences and input_format != "conllu":
        raise DepinduceError(needs_conllu_message(backend))
    if input_format == "text":
        label = "<stdin>" if input_path == "-" else input_path
        sentences = read_text(input_path, pretokenized=tokenized,
                              on_blank=lambda lines: click.echo(describe_blank_lines(label, lines), err=True))
    else:
        sentences = read_sentences(input_path, fmt="conllu")
    check_whole_sentence_input(backend, sentences, "<stdin>" if input_path == "-" else input_path)
    graphs = None
    if init is not None and init.lower() not in ("syntr", "empty"):
        graphs = read_initial_parse(init, sentences)
    out_fmt = "conllu-ud" if full_ud else fmt
    write_sentences(parse(sentences, backend, request, progress=not quiet, init=graphs), sys.stdout, out_fmt)
