"""``depinduce perplexity``: a trained language model's perplexity on a model-view text file."""

from __future__ import annotations

from pathlib import Path

import click

from depinduce.display import json_text


@click.command("perplexity")
@click.option("--model", "run_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              metavar="RUN_DIR", help="A training run directory.")
@click.argument("text", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path), metavar="FILE|-")
@click.option("--batch-tokens", type=click.IntRange(min=1), default=None,
              help="Padded tokens per batch (default: the run's train.batch_tokens).")
@click.option("--device", default="cpu", show_default=True,
              help="Torch device for the model: auto, cpu, cuda or cuda:N.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def perplexity_command(run_dir: Path, text: Path, batch_tokens: int | None, device: str, as_json: bool,
                       quiet: bool) -> None:
    """Perplexity of the model in RUN_DIR on FILE: one normalised sentence per line, as `depinduce preprocess`
    writes train/dev/test.txt (e.g. data/ptb/test.txt).  Measured with the run's own objective and settings."""
    from depinduce.api.commands import perplexity

    result = perplexity(run_dir, text, device=device, batch_tokens=batch_tokens, progress=not quiet)
    if as_json:
        click.echo(json_text(result.as_dict()))
        return
    what = {"lm": "next-word", "lm-continuous": "next-word, continuous text", "mlm": "masked-LM pseudo-perplexity",
            "likelihood": "upper bound from the ELBO (exact for the neural PCFG)"}
    click.echo(f"{text}: perplexity {result.perplexity:.2f} ({what[result.objective]}; {result.predicted:,} "
               f"predicted tokens in {result.sentences:,} sentences; loss {result.loss:.4f} nats)")
