"""``depinduce report``: several runs (seeds, configurations) in one table, with the papers' figures beside.

:func:`build_report` collects the finished runs (:mod:`.runs`; a note per run says how it ended and its selected
dev score beside right-branching's, with a warning below it), scores each run's selected model on the test
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

from depinduce.display import say
from depinduce.errors import NotFoundError, UsageError
from depinduce.api.reporting.aggregate import Group, attach_papers, group_runs, stop_point_notes, test_labels
from depinduce.api.reporting.render import FORMATS, as_dict, render
from depinduce.api.reporting.runs import Run, Warn, collect_runs, shown_path
from depinduce.api.reporting.scores import Scores, score_run
from depinduce.io.filenames import TEST_CONLLU
from depinduce.training.outcome import run_outcome

__all__ = ["FORMATS", "Report", "build_report"]

SD_NOTE = ("sd: the sample standard deviation over a group's runs (n − 1 in the denominator); a single run's "
           "value stands alone; n: "
           "the runs that measured the metric; a group: one model and recipe (train.seed aside) on one data "
           "folder, scored on one test file")


def _stderr(line: str) -> None:
    say(line)


@dataclass
class Report:
    """Groups of scored runs, the notes printed under them, and every finished run (for the learning curves)."""

    groups: list[Group]
    notes: list[str]
    protocol: list[str]
    runs: list[Run] = field(default_factory=list)

    def render(self, fmt: str = "table", *, layout: str = "long", notes: bool = True) -> str:
        """The table in ``fmt`` (table, markdown, latex, csv or json) and ``layout`` (long: a row per metric;
        wide: models × metrics), with the protocol and notes under it unless ``notes`` is false."""
        return render(self.groups, fmt, notes=self.notes, protocol=self.protocol, layout=layout, show_notes=notes)

    def as_dict(self) -> dict[str, Any]:
        return as_dict(self.groups, self.notes, self.protocol)

    def plot(self, path: str | PathLike[str], *, metric: str | None = None, force: bool = False,
             x_axis: str = "step") -> str:
        """Learning curves of every run into ``path`` (.png/.svg/.pdf; an existing file only with ``force``)
        against ``x_axis`` (step, tokens or minutes); returns the metric plotted."""
        from depinduce.api.reporting.plot import plot_curves

        return plot_curves(self.curve_groups(), Path(path), metric=metric, force=force, x_axis=x_axis)

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
    default = run.data_dir / TEST_CONLLU if run.data_dir else None
    return [default] if default is not None and default.is_file() else []


def _notes(scored: list[tuple[Run, Scores]], groups: list[Group], paper_notes: list[str],
           labels: dict[Path, str] | None = None) -> list[str]:
    """What the table's reader must know; a sibling file is named by its test file's ``--label`` when given,
    else by its path relative to the current folder (:func:`shown_path`)."""
    notes = [SD_NOTE, "scores: each run's selected model (model.pt) on the test file, parsed with the run's own "
                      "decoder (train.decoder) unless --decoder, scored as `depinduce parse` + `depinduce eval`; "
                      "kept in RUN_DIR/scores.json"]

    def named(scores: Scores, sibling: str) -> str:
        return (labels or {}).get(scores.test.resolve()) or shown_path(sibling)

    trees = sorted({named(s, s.gold_trees) for _, s in scored
                    if s.gold_trees and s.metrics.get("uf1_sentence") is not None})
    if trees:
        notes.append("UF1: against the gold trees beside each test file (STEM.trees): " + ", ".join(trees))
    texts = sorted({named(s, s.text) for _, s in scored if s.text and s.metrics.get("perplexity") is not None})
    if texts:
        notes.append("perplexity: `depinduce perplexity` on the model view beside each test file (STEM.txt): "
                     + ", ".join(texts))
    sources = sorted({figure.source for group in groups for figure in group.paper.values()})
    if sources:
        notes.append("paper's figure: the published mean ± sd over the paper's seeds, from " + "; ".join(sources))
    return notes + paper_notes


def build_report(paths: Iterable[str | PathLike[str]], tests: Sequence[str | PathLike[str]] = (), *,
                 decoder: str | None = None, device: str = "cpu", warn: Warn = _stderr,
                 measure_with: Callable[..., Any] | None = None, labels: Sequence[str] = ()) -> Report:
    """Collect the runs under ``paths``, score them on ``tests`` (default: each run's data folder's test.conllu),
    group and summarise them; ``labels`` name the ``tests`` in the table (default: the files' stems).  Runs
    that cannot be reported are skipped with a warning through ``warn``."""
    test_paths = [Path(t) for t in tests]
    if labels and not test_paths:
        raise UsageError("--label names the --test files; give --test FILE for each --label")
    named = test_labels(test_paths, labels) if test_paths else None
    from depinduce.models.devices import resolve_device  # torch: only once a report is built

    device = str(resolve_device(device))  # checked even when every score is cached: a bad --device is one line
    for test in test_paths:
        if not test.is_file():
            raise NotFoundError(f"--test {test}: no such file")
    runs = collect_runs([Path(p) for p in paths], warn)
    endings = _endings(runs, warn)
    scored: list[tuple[Run, Scores]] = []
    for run in runs:
        chosen = _tests_for(run, test_paths)
        if not chosen:
            warn(f"warning: {run.path}: its data folder {run.data_dir} has no test.conllu; pass --test FILE to "
                 "score it (its learning curve is still plotted)")
        for test in chosen:
            scores = score_run(run, test, decoder=decoder, device=device, measure_with=measure_with)
            if scores.note is not None:
                warn(scores.note)
            scored.append((run, scores))
    groups = group_runs(scored, named, labelled=bool(labels))
    paper_notes = attach_papers(groups) + stop_point_notes(groups)
    protocol: list[str] = []
    for _, scores in scored:
        protocol.extend(line for line in scores.protocol if line not in protocol)
    notes = _notes(scored, groups, paper_notes, named if labels else None)
    return Report(groups, notes + endings, protocol, runs)


def _endings(runs: list[Run], warn: Warn) -> list[str]:
    """A note per run saying how it ended and how good its selected model was on dev (an interrupted or
    budget-stopped run is averaged with the others, so the table's reader must see it), and a warning for each
    whose selected model scores below right-branching on its dev data."""
    notes = []
    for run in runs:
        outcome = run_outcome(run.path)
        if outcome is None:
            continue
        notes.append(f"run {shown_path(run.path)}: {outcome.summary()}")
        if (warning := outcome.warning()) is not None:
            warn(warning)
    return notes
