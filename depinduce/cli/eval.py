"""``depinduce eval``: score a prediction file against a gold file under the documented protocol."""

from __future__ import annotations

import click
from depinduce.cli.common import stdout_console


@click.command("eval")
@click.option("--gold", "gold_path", required=True, metavar="FILE",
              help="Gold file: CoNLL-U, CoNLL-X, word/tag/head columns, or bracketed trees (detected).")
@click.option("--pred", "pred_path", required=True, metavar="FILE",
              help="Predicted file in any of the same formats; '-' reads stdin.")
@click.option("--keep-punct", is_flag=True, help="Score every token, punctuation included (CoNLL 2018 scorer style).")
@click.option("--punct-rule", type=click.Choice(("auto", "ptb", "ud", "shape")), default="auto", show_default=True,
              help="How gold punctuation is recognised: PTB word-tag filter, UD UPOS PUNCT, or token shape.")
@click.option("--max-length", type=click.IntRange(min=1), default=None, metavar="N",
              help="Score only sentences with at most N scored words (10 gives WSJ10).")
@click.option("--by-length", is_flag=True, help="Also print the metrics per length bucket.")
@click.option("--json", "as_json", is_flag=True, help="Print full-precision JSON with counts instead of tables.")
def eval_command(gold_path: str, pred_path: str, keep_punct: bool, punct_rule: str, max_length: int | None,
                 by_length: bool, as_json: bool) -> None:
    """Score PRED against GOLD: DDA/UAS, UDA/UUAS, LAS, root accuracy, well-formedness, UF1."""
    # imported here, not above: `depinduce --help` imports every command module
    from depinduce.api.scoring import evaluate

    # the one implementation, shared with the Python API (depinduce.evaluate); only the printing is here
    evaluation = evaluate(gold_path, pred_path, keep_punct=keep_punct, max_length=max_length, punct_rule=punct_rule)
    if as_json:
        click.echo(evaluation.to_json())
    else:
        evaluation.render(stdout_console(), by_length=by_length)
