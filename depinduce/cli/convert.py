"""``depinduce convert``: a gold file as the MaltEval-safe CoNLL-U that ``parse`` writes, on stdout.

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
def convert_command(path: str, from_format: str, head_rules: str) -> None:
    """Write the gold trees of FILE as MaltEval-safe CoNLL-U to stdout: syntactic words only, ten columns, integer
    HEAD, DEPREL, DEPS '_', no comment; eval scores it exactly as FILE (its punctuation is kept in the tags)."""
    from depinduce.api.conversion import convert  # here, not above: `depinduce --help` imports every command module

    convert(path, sys.stdout, from_format=from_format, head_rules=head_rules)
