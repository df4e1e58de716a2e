"""``depinduce analyze``: look inside a trained model against gold annotation."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from depinduce.cli.common import stdout_console
from depinduce.errors import InputError, ModelError, NotFoundError, RunDirectoryError, UsageError
from depinduce.cli.decoders import DecoderOption


@click.group("analyze")
def analyze() -> None:
    """Analyses of trained models against labelled gold trees."""


def _check_output(path: str | None, force: bool) -> Path | None:
    if path is None:
        return None
    out = Path(path)
    if out.is_dir():
        raise UsageError(f"{out}: is a folder; give a file name")
    if out.exists() and not force:
        raise RunDirectoryError(f"{out}: already exists (use --force to overwrite it)")
    if not out.parent.is_dir():
        raise NotFoundError(f"{out}: folder {out.parent} does not exist")
    return out


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
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True)
@click.option("--device", default="cpu", show_default=True)
@click.option("--force", is_flag=True, help="Overwrite existing --csv / --plot files.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def heads_command(model_dir: str, gold_path: str, top: int, direction: str, csv_path: str | None,
                  plot_path: str | None, as_json: bool, batch_size: int, device: str, force: bool,
                  quiet: bool) -> None:
    """Pearson correlation between every attention head's controller probability and every gold dependency
    label, over the gold edges of FILE (the UDGN paper's Table 3)."""
    from tqdm import tqdm

    from depinduce.io import read_sentences
    from depinduce.analysis.heads import correlate, edge_features, head_name, save_heatmap
    from depinduce.models.registry import load_model

    csv_out, plot_out = _check_output(csv_path, force), _check_output(plot_path, force)
    gold = read_sentences(gold_path, fmt="conllu")
    if not any(s.deprels and any(label not in ("_", "") for label in s.deprels) for s in gold):
        raise InputError(gold_path, None, "no dependency labels to correlate with (DEPREL is empty)")
    model = load_model(model_dir, device=device)
    if not callable(getattr(model, "controller_probabilities", None)):
        raise ModelError(f"model {model_dir} ({model.name}) has no competitive heads to analyse; "
                         "analyze heads needs a UDGN run")
    with tqdm(total=len(gold), unit="sent", file=sys.stderr, disable=True if quiet else None, leave=False) as bar:
        features, labels, heads = edge_features(model, gold, direction=direction, batch_size=batch_size,
                                                progress=bar.update)
    full = correlate(features, labels, heads, top=None, direction=direction)
    if csv_out is not None:
        full.write_csv(csv_out)
    if plot_out is not None:
        save_heatmap(full, plot_out)
    shown = range(min(top, len(full.labels)))
    if as_json:
        rows = []
        for row in shown:
            best = full.best(row)
            rows.append({"label": full.labels[row], "edges": full.counts[row],
                         "head": None if best is None else head_name(best[0]),
                         "pcc": None if best is None else best[1]})
        click.echo(json.dumps({"edges": full.edges, "direction": direction, "labels": rows}, indent=2))
        return
    from rich.table import Table

    table = Table(title=f"Most correlated head per gold label ({direction}, {full.edges:,} edges)")
    for name, justify in (("label", "left"), ("edges", "right"), ("head", "left"), ("PCC", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in shown:
        best = full.best(row)
        table.add_row(full.labels[row], f"{full.counts[row]:,}", "-" if best is None else head_name(best[0]),
                      "-" if best is None else f"{best[1]:.2f}")
    console = stdout_console()
    console.print(table)
    console.print("PCC = Pearson correlation over gold edges between a head's controller probability and the "
                  "label's indicator; punctuation removed as in eval, labels on their universal part.")


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
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True)
@click.option("--device", default="cpu", show_default=True)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def channels_command(model_dir: str, gold_path: str, decoder: str, top: int, as_json: bool, batch_size: int,
                     device: str, quiet: bool) -> None:
    """DDA/UDA of every head channel and of their average on FILE, scored as `parse --channel K` + `eval`
    would, and which channel attaches each gold label best."""
    from tqdm import tqdm

    from depinduce.io import read_sentences
    from depinduce.analysis.channels import AVERAGE, analyze_channels, has_channels
    from depinduce.metrics.report import percent
    from depinduce.models.registry import load_model

    model = load_model(model_dir, device=device)
    if not has_channels(model):
        raise ModelError(f"model {model_dir} ({model.name}) has no head channels to analyse; "
                         "analyze channels needs a backend with several head channels (probformer)")
    gold = read_sentences(gold_path, fmt="conllu")
    with tqdm(total=len(gold), unit="sent", file=sys.stderr, disable=True if quiet else None, leave=False) as bar:
        report = analyze_channels(model, gold, decoder=decoder, batch_size=batch_size, gold_path=gold_path,
                                  progress=bar.update)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
        return
    from rich.table import Table

    def name(view: int | str) -> str:
        return "avg" if view == AVERAGE else str(view)

    console = stdout_console()
    scores = Table(title=f"Per-channel accuracy ({decoder}, {report.counts[0].tokens:,} scored words)",
                   title_justify="left")
    for column, justify in (("channel", "right"), ("DDA", "right"), ("UDA", "right"), ("root acc.", "right"),
                            ("well-formed", "right")):
        scores.add_column(column, justify=justify)  # type: ignore[arg-type]
    for view, counts in zip(report.views, report.counts):
        scores.add_row(name(view), percent(counts.dda), percent(counts.uda), percent(counts.root_accuracy),
                       percent(counts.well_formed_share))
    console.print(scores)
    console.print(f"Best channel by DDA: {report.best_overall()} (parse --channel {report.best_overall()}); "
                  "choose on dev data, never on test data.")
    if not report.labels:
        console.print("The gold file has no dependency labels: no label table.")
        return
    table = Table(title="Directed accuracy per gold label and channel (%)", title_justify="left", padding=(0, 1))
    table.add_column("label")
    table.add_column("words", justify="right")
    table.add_column("best", justify="right")
    for view in report.views:
        table.add_column(name(view), justify="right")
    for row in range(min(top, len(report.labels))):
        best, _ = report.best_channel(row)
        cells = []
        for k, view in enumerate(report.views):
            text = percent(report.accuracy(row, k))
            cells.append(f"[bold]{text}[/bold]" if view == best else text)
        table.add_row(report.labels[row], f"{report.label_words[row]:,}", "–" if best is None else str(best), *cells)
    console.print(table)
    console.print("Punctuation removed as in eval; labels on their universal part; a word counts for its label "
                  "when the channel's decoded head is its gold head.")
