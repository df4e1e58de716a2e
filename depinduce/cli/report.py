"""``depinduce report``: runs (seeds, configurations) in one table of test scores, and their learning curves."""

from __future__ import annotations

from pathlib import Path

import click

from depinduce.api.reporting.plot import X_AXES
from depinduce.api.reporting.render import FORMATS, LAYOUTS
from depinduce.display import say


@click.command("report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="RUN_DIR...")
@click.option("--test", "tests", multiple=True, type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="CoNLL-U test file with gold heads (repeatable). Its siblings STEM.trees (gold trees: UF1) and "
                   "STEM.txt (model view: perplexity) are used when present. Default: each run's data folder's "
                   "test.conllu.")
@click.option("--label", "labels", multiple=True, metavar="NAME",
              help="The table's name for each --test file, in order (default: the file's stem).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="Output format; every one but csv and json prints the protocol and notes under the table.")
@click.option("--layout", type=click.Choice(LAYOUTS), default="long", show_default=True,
              help="long: a row per group and metric (n, min, max, paper's figure); wide: a row per group, a "
                   "column per metric (mean ± sd), the paper's figures as rows of their own.")
@click.option("--notes/--no-notes", default=True, show_default=True,
              help="Print the protocol (grouped: dependency, UF1) and the notes under the table.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE.png|svg|pdf", help="Also draw the dev learning curves (needs the 'plot' extra).")
@click.option("--x", "x_axis", type=click.Choice(X_AXES), default="step", show_default=True,
              help="The curves' horizontal axis: optimisation step, tokens seen, or wall-clock minutes.")
@click.option("--force", is_flag=True, help="Overwrite an existing --plot file.")
@click.option("--metric", default=None, metavar="NAME",
              help="Dev metric of the learning curves, as in metrics.jsonl (dev_uda, dev_ppl, …). Default: the "
                   "one the runs selected their model by.")
@click.option("--decoder", default=None, metavar="NAME", help="Dependency decoder (default: each run's own).")
@click.option("--device", default="cpu", show_default=True, help="Device that parses the test files.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="CPU threads for torch.")
def report_command(run_dirs: tuple[Path, ...], tests: tuple[Path, ...], labels: tuple[str, ...], fmt: str,
                   layout: str, notes: bool, plot_path: Path | None, x_axis: str, force: bool, metric: str | None,
                   decoder: str | None, device: str, threads: int | None) -> None:
    """Collect finished runs (run directories, or folders of them such as `train --seeds` makes), score each
    run's selected model on the test files (cached in the run), and print per configuration n, mean ± sd, min
    and max of DDA, UDA, LAS, UF1 and perplexity, with the paper's figure where it applies."""
    from depinduce.api.reporting.command import report_runs

    text = report_runs(run_dirs, tests=tests, labels=labels, fmt=fmt, layout=layout, notes=notes, plot=plot_path,
                       x_axis=x_axis, metric=metric, force=force, decoder=decoder, device=device, threads=threads,
                       warn=say)
    click.echo(text, nl=False)
