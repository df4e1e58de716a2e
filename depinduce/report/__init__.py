"""``depinduce report``: several runs (seeds, configurations) in one table, with the papers' figures beside.

:func:`build_report` collects the finished runs (:mod:`.runs`), scores each run's selected model on the test
files through the ``parse`` + ``eval`` code, cached in the run (:mod:`.scores`), groups them by configuration
and takes mean, sample sd, min and max per metric (:mod:`.aggregate`), and looks up the published figures for
the same model and data (:mod:`.papers`).  :meth:`Report.render` prints it (:mod:`.render`) and
:meth:`Report.plot` draws the learning curves (:mod:`.plot`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import click

from depinduce.errors import NotFoundError
from depinduce.report.aggregate import Group, attach_papers, group_runs
from depinduce.report.render import FORMATS, as_dict, render
from depinduce.report.runs import Run, Warn, collect_runs
from depinduce.report.scores import Scores, score_run

__all__ = ["FORMATS", "Report", "build_report"]

SD_NOTE = ("sd: the sample standard deviation over a group's runs (n − 1 in the denominator), – where n = 1; n: "
           "the runs that measured the metric; a group: one model and recipe (train.seed aside) on one data "
           "folder, scored on one test file")


def _stderr(line: str) -> None:
    click.echo(line, err=True)


@dataclass
class Report:
    """Groups of scored runs, the notes printed under them, and every finished run (for the learning curves)."""

    groups: list[Group]
    notes: list[str]
    protocol: list[str]
    runs: list[Run] = field(default_factory=list)

    def render(self, fmt: str = "table") -> str:
        """The table in ``fmt``: table, markdown, latex, csv or json."""
        return render(self.groups, fmt, notes=self.notes, protocol=self.protocol)

    def as_dict(self) -> dict[str, Any]:
        return as_dict(self.groups, self.notes, self.protocol)

    def plot(self, path: str | PathLike[str], *, metric: str | None = None) -> str:
        """Learning curves of every run into ``path`` (.png/.svg/.pdf); returns the metric plotted."""
        from depinduce.report.plot import plot_curves

        return plot_curves(self.curve_groups(), Path(path), metric=metric)

    def curve_groups(self) -> list[tuple[str, list[Run]]]:
        """The runs by configuration, named as in the table (a run scored on nothing by its model's name)."""
        labels: dict[str, str] = {}
        for group in self.groups:
            labels.setdefault(group.runs[0][0].configuration_key(), group.label)
        out: dict[str, list[Run]] = {}
        for run in self.runs:
            out.setdefault(run.configuration_key(), []).append(run)
        return [(labels.get(key, members[0].model), members) for key, members in out.items()]


def _tests_for(run: Run, tests: Sequence[Path]) -> list[Path]:
    """``--test`` files, else the run's data folder's test.conllu when it has one."""
    if tests:
        return list(tests)
    default = run.data_dir / "test.conllu" if run.data_dir else None
    return [default] if default is not None and default.is_file() else []


def _notes(scored: list[tuple[Run, Scores]], groups: list[Group], paper_notes: list[str]) -> list[str]:
    notes = [SD_NOTE, "scores: each run's selected model (model.pt) on the test file, parsed with the run's own "
                      "decoder (train.decoder) unless --decoder, scored as `depinduce parse` + `depinduce eval`; "
                      "kept in RUN_DIR/scores.json"]
    trees = sorted({s.gold_trees for _, s in scored if s.gold_trees and s.metrics.get("uf1_sentence") is not None})
    if trees:
        notes.append("UF1: against the gold trees beside each test file (STEM.trees): " + ", ".join(trees))
    texts = sorted({s.text for _, s in scored if s.text and s.metrics.get("perplexity") is not None})
    if texts:
        notes.append("perplexity: `depinduce perplexity` on the model view beside each test file (STEM.txt): "
                     + ", ".join(texts))
    sources = sorted({figure.source for group in groups for figure in group.paper.values()})
    if sources:
        notes.append("paper's figure: the published mean ± sd over the paper's seeds, from " + "; ".join(sources))
    return notes + paper_notes


def build_report(paths: Iterable[str | PathLike[str]], tests: Sequence[str | PathLike[str]] = (), *,
                 decoder: str | None = None, device: str = "cpu", warn: Warn = _stderr,
                 measure_with: Callable[..., Any] | None = None) -> Report:
    """Collect the runs under ``paths``, score them on ``tests`` (default: each run's data folder's test.conllu),
    group and summarise them.  Runs that cannot be reported are skipped with a warning through ``warn``."""
    test_paths = [Path(t) for t in tests]
    for test in test_paths:
        if not test.is_file():
            raise NotFoundError(f"--test {test}: no such file")
    runs = collect_runs([Path(p) for p in paths], warn)
    scored: list[tuple[Run, Scores]] = []
    for run in runs:
        chosen = _tests_for(run, test_paths)
        if not chosen:
            warn(f"warning: {run.path}: its data folder {run.data_dir} has no test.conllu; pass --test FILE to "
                 "score it (its learning curve is still plotted)")
        for test in chosen:
            scored.append((run, score_run(run, test, decoder=decoder, device=device, measure_with=measure_with)))
    groups = group_runs(scored)
    paper_notes = attach_papers(groups)
    protocol: list[str] = []
    for _, scores in scored:
        protocol.extend(line for line in scores.protocol if line not in protocol)
    return Report(groups, _notes(scored, groups, paper_notes), protocol, runs)
