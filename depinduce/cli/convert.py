"""``depinduce convert``: a gold file as the MaltEval-safe CoNLL-U that ``parse`` writes (or as the tokenised text
``parse`` reads back with the gold's tokens), on stdout.

Thin: the work is :func:`depinduce.api.conversion.convert`, the Python API's own.
"""

from __future__ import annotations

import sys

import click

from depinduce.api.choices import HEAD_RULE_NAMES, INPUT_FORMATS


@click.command("convert")
@click.argument("path", metavar="FILE|-")
@click.option("--from", "from_format", type=click.Choice(INPUT_FORMATS), default="auto", show_default=True,
              help="Input format: CoNLL-U, CoNLL-X, word/tag/head columns or labelled PTB trees (detected by "
                   "default, as eval detects it).")
@click.option("--head-rules", type=click.Choice(HEAD_RULE_NAMES), default="penn2malt", show_default=True,
              help="Head rules that turn PTB trees into dependencies (as preprocess ptb --head-rules).")
@click.option("--format", "fmt", type=click.Choice(("conllu", "text")), default="conllu", show_default=True,
              help="conllu: the gold trees (gold.conllu for MaltEval). text: the same words, one sentence a line "
                   "under a first line that makes `depinduce parse` keep them as they are (input.txt): its parse "
                   "has exactly the gold's tokens.")
def convert_command(path: str, from_format: str, head_rules: str, fmt: str) -> None:
    """Write the gold trees of FILE as MaltEval-safe CoNLL-U to stdout: syntactic words only, ten columns, integer
    HEAD, DEPREL, DEPS '_', no comment; eval scores it exactly as FILE (its punctuation is kept in the tags).
    With --format text, its words instead, as the input whose parse MaltEval scores against that CoNLL-U."""
    from depinduce.api.conversion import convert  # here, not above: `depinduce --help` imports every command module

    convert(path, sys.stdout, from_format=from_format, head_rules=head_rules, fmt=fmt)
