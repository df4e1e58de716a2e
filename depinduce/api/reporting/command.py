"""``depinduce report`` from Python: :func:`report_runs` is what the command calls, so a notebook gets the text
it prints (``depinduce.report_runs``; the API cannot hold it, being a layer below the report)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from os import PathLike

from depinduce.api.checks import check_types
from depinduce.api.words import python_words
from depinduce.errors import RunDirectoryError, UsageError
from depinduce.api.reporting import build_report
from depinduce.api.reporting.runs import Warn

def _stderr(line: str) -> None:
    from depinduce.display import say

    say(line)


def _paths(value: str | PathLike[str] | Iterable[str | PathLike[str]], name: str) -> list[str | PathLike[str]]:
    """One path, or several; each a str or PathLike (else a UsageError naming the parameter)."""
    items = [value] if isinstance(value, (str, PathLike)) else value
    if isinstance(items, bytes) or not isinstance(items, Iterable):
        raise UsageError(f"{name}: expected a path or a list of paths, not {type(value).__name__}")
    items = list(items)
    for item in items:
        check_types(**{name: (item, (str, PathLike))})
    return items


@python_words
def report_runs(runs: str | PathLike[str] | Iterable[str | PathLike[str]], *,
                tests: str | PathLike[str] | Sequence[str | PathLike[str]] = (), labels: str | Sequence[str] = (),
                fmt: str = "table", layout: str = "long", notes: bool = True,
                plot: str | PathLike[str] | None = None, x_axis: str = "step", metric: str | None = None,
                force: bool = False, decoder: str | None = None, device: str = "cpu", threads: int | None = None,
                warn: Warn = _stderr) -> str:
    """``depinduce report RUN_DIR...``: score every finished run under ``runs`` (run directories, or folders of
    them such as ``train(seeds=…)`` makes) on ``tests`` (default: each run's data folder's test.conllu; scores
    cached in the run) and return the table the command prints in ``fmt`` (table, markdown, latex, csv, json)
    and ``layout`` (long, wide), with the protocol and notes unless ``notes`` is false.  ``plot`` also draws the
    dev learning curves (``metric`` against ``x_axis``: step, tokens or minutes; an existing file only with
    ``force``).  Warnings, and the line naming the plotted metric, go to ``warn`` (default: stderr).  For the
    groups' numbers themselves use :func:`depinduce.api.reporting.build_report`."""
    from depinduce.io.outputs import check_new_file

    run_dirs, test_files = _paths(runs, "runs"), _paths(tests, "tests")
    if isinstance(labels, str):
        labels = [labels]
    if plot is not None:
        check_new_file(plot, force)  # before the runs are scored: a refusal costs nothing
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    report = build_report(run_dirs, test_files, decoder=decoder, device=device, labels=labels, warn=warn)
    if not report.groups and plot is None:
        raise RunDirectoryError("nothing to report: no run has a test file (pass --test FILE)")
    text = report.render(fmt, layout=layout, notes=notes) if report.groups else ""
    if plot is not None:
        plotted = report.plot(plot, metric=metric, force=force, x_axis=x_axis)
        warn(f"learning curves of {plotted} written to {plot}")
    return text
