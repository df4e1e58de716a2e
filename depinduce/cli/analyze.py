"""``depinduce analyze``: look inside a trained model against gold annotation."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from depinduce.cli.common import stdout_console
from depinduce.errors import DepinduceError


@click.group("analyze")
def analyze() -> None:
    """Analyses of trained models against labelled gold trees."""


def _check_output(path: str | None, force: bool) -> Path | None:
    if path is None:
        return None
    out = Path(path)
    if out.exists() and not force:
        raise DepinduceError(f"{out}: already exists (use --force to overwrite it)")
    if not out.parent.is_dir():
        raise DepinduceError(f"{out}: folder {out.parent} does not exist")
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
    from depinduce.metrics.heads import correlate, edge_features, head_name, save_heatmap
    from depinduce.models.registry import load_model

    csv_out, plot_out = _check_output(csv_path, force), _check_output(plot_path, force)
    gold = read_sentences(gold_path, fmt="conllu")
    if not any(s.deprels and any(label not in ("_", "") for label in s.deprels) for s in gold):
        raise DepinduceError(f"{gold_path}: no dependency labels to correlate with (DEPREL is empty)")
    model = load_model(model_dir, device=device)
    if not callable(getattr(model, "controller_probabilities", None)):
        raise DepinduceError(f"model {model_dir} ({model.name}) has no competitive heads to analyse; "
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
