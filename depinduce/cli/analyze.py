"""``depinduce analyze``: look inside a trained model against gold annotation."""

from __future__ import annotations

import click

from depinduce.cli.common import stdout_console
from depinduce.cli.decoders import DecoderOption


@click.group("analyze")
def analyze() -> None:
    """Analyses of trained models against labelled gold trees."""


@analyze.command("heads")
@click.option("--model", "model_dir", required=True, metavar="RUN_DIR", help="A trained UDGN run directory.")
@click.option("--gold", "gold_path", required=True, metavar="FILE.conllu", help="Labelled gold CoNLL-U.")
@click.option("--labels", "top", type=click.IntRange(min=1), default=15, show_default=True,
              help="How many of the most frequent labels to show (the CSV and plot hold all).")
@click.option("--direction", type=click.Choice(("child-to-parent", "parent-to-child")), default="child-to-parent",
              show_default=True, help="Which message along a gold edge: the paper's Table 3 uses child to parent.")
@click.option("--csv", "csv_path", metavar="FILE", help="Write the full label × head correlation matrix.")
@click.option("--plot", "plot_path", metavar="FILE.png|svg",
              help="Draw the matrix as a heat map (needs matplotlib: pip install 'depinduce[plot]').")
@click.option("--json", "as_json", is_flag=True, help="Print every label's best head as JSON instead of a table.")
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True,
              help="Sentences per model call.")
@click.option("--device", default="cpu", show_default=True,
              help="Torch device for the model: auto, cpu, cuda or cuda:N.")
@click.option("--force", is_flag=True, help="Overwrite existing --csv / --plot files.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def heads_command(model_dir: str, gold_path: str, top: int, direction: str, csv_path: str | None,
                  plot_path: str | None, as_json: bool, batch_size: int, device: str, force: bool,
                  quiet: bool) -> None:
    """Pearson correlation between every attention head's controller probability and every gold dependency
    label, over the gold edges of FILE (the UDGN paper's Table 3)."""
    from depinduce.api.analysis import analyze_heads

    result = analyze_heads(model_dir, gold_path, top=top, direction=direction, csv=csv_path, plot=plot_path,
                           batch_size=batch_size, device=device, force=force, progress=not quiet)
    if as_json:
        click.echo(result.to_json())
        return
    result.render(stdout_console())


@analyze.command("channels")
@click.option("--model", "model_dir", required=True, metavar="RUN_DIR",
              help="A trained run of a backend with several head channels (probformer).")
@click.option("--gold", "gold_path", required=True, metavar="FILE.conllu",
              help="Gold CoNLL-U with heads (and labels for the label table); use dev data to choose a channel.")
@click.option("--decoder", cls=DecoderOption, default="mst", show_default=True,
              help="Decoder applied to each channel's heads, as in `depinduce parse`.")
@click.option("--labels", "top", type=click.IntRange(min=1), default=15, show_default=True,
              help="How many of the most frequent gold labels to show (--json holds all).")
@click.option("--json", "as_json", is_flag=True, help="Print every channel's and every label's figures as JSON.")
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True,
              help="Sentences per model call.")
@click.option("--device", default="cpu", show_default=True,
              help="Torch device for the model: auto, cpu, cuda or cuda:N.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def channels_command(model_dir: str, gold_path: str, decoder: str, top: int, as_json: bool, batch_size: int,
                     device: str, quiet: bool) -> None:
    """DDA/UDA of every head channel and of their average on FILE, scored as `parse --channel K` + `eval`
    would, and which channel attaches each gold label best."""
    from depinduce.api.analysis import analyze_channels

    result = analyze_channels(model_dir, gold_path, decoder=decoder, top=top, batch_size=batch_size, device=device,
                              progress=not quiet)
    if as_json:
        click.echo(result.to_json())
        return
    result.render(stdout_console())
