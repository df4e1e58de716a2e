"""``depinduce report``: runs (seeds, configurations) in one table of test scores, and their learning curves."""

from __future__ import annotations

from pathlib import Path

import click

from depinduce.report.render import FORMATS


@click.command("report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="RUN_DIR...")
@click.option("--test", "tests", multiple=True, type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="CoNLL-U test file with gold heads (repeatable). Its siblings STEM.trees (gold trees: UF1) and "
                   "STEM.txt (model view: perplexity) are used when present. Default: each run's data folder's "
                   "test.conllu.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="Output format; every one but csv and json prints the protocol and notes under the table.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE.png|svg|pdf", help="Also draw the dev learning curves (against step and wall-clock "
                                               "minutes; needs the 'plot' extra).")
@click.option("--metric", default=None, metavar="NAME",
              help="Dev metric of the learning curves, as in metrics.jsonl (dev_uda, dev_ppl, …). Default: the "
                   "one the runs selected their model by.")
@click.option("--decoder", default=None, metavar="NAME", help="Dependency decoder (default: each run's own).")
@click.option("--device", default="cpu", show_default=True, help="Device that parses the test files.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="CPU threads for torch.")
def report_command(run_dirs: tuple[Path, ...], tests: tuple[Path, ...], fmt: str, plot_path: Path | None,
                   metric: str | None, decoder: str | None, device: str, threads: int | None) -> None:
    """Collect finished runs (run directories, or folders of them such as `train --seeds` makes), score each
    run's selected model on the test files (cached in the run), and print per configuration n, mean ± sd, min
    and max of DDA, UDA, LAS, UF1 and perplexity, with the paper's figure where it applies."""
    from depinduce.errors import RunDirectoryError
    from depinduce.report import build_report

    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    report = build_report(run_dirs, tests, decoder=decoder, device=device)
    if not report.groups and plot_path is None:
        raise RunDirectoryError("nothing to report: no run has a test file (pass --test FILE)")
    if report.groups:
        click.echo(report.render(fmt), nl=False)
    if plot_path is not None:
        plotted = report.plot(plot_path, metric=metric)
        click.echo(f"learning curves of {plotted} written to {plot_path}", err=True)
