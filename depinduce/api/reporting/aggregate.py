"""Runs grouped by configuration, and each group's statistics per metric.

A group is the runs of one configuration — the same model and resolved recipe apart from ``train.seed``, on the
same data — scored on one test file.  Per metric it has n (the runs that measured it), the mean, the *sample*
standard deviation (n − 1 in the denominator; none for a single run), the minimum and the maximum.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from depinduce.display import shown_name
from depinduce.errors import UsageError
from depinduce.api.reporting.papers import PaperFigure, paper_figures
from depinduce.api.reporting.runs import Run, shown_path
from depinduce.api.reporting.scores import METRICS, Scores

LABELS = {"dda": "DDA", "uda": "UDA", "las": "LAS", "uf1_sentence": "UF1 (sentence)", "uf1_corpus": "UF1 (corpus)",
          "perplexity": "perplexity"}


@dataclass(frozen=True)
class Stat:
    """A metric over a group's runs."""

    n: int
    mean: float
    sd: float | None  # sample standard deviation; None when n = 1
    min: float
    max: float

    def as_dict(self) -> dict[str, Any]:
        return {"n": self.n, "mean": self.mean, "sd": self.sd, "min": self.min, "max": self.max}


def summarize(values: list[float]) -> Stat | None:
    """n, mean, sample sd, min and max of the finite ``values``; None when there is none."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return None
    sd = statistics.stdev(finite) if len(finite) > 1 else None
    return Stat(len(finite), statistics.fmean(finite), sd, min(finite), max(finite))


@dataclass
class Group:
    """The runs of one configuration on one test file."""

    label: str
    model: str
    test: Path
    recipe: dict[str, Any]
    runs: list[tuple[Run, Scores]]
    stats: dict[str, Stat | None] = field(default_factory=dict)
    paper: dict[str, PaperFigure] = field(default_factory=dict)
    test_label: str = ""  # what the table calls the test file (never its absolute path: see test_labels)
    test_labelled: bool = False  # test_label is the user's --label: every layout must show it

    @property
    def n(self) -> int:
        return len(self.runs)

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "model": self.model,
            "test": shown_path(self.test),
            "test_label": self.test_label,
            "n": self.n,
            "recipe": self.recipe,
            "runs": [{"path": shown_path(run.path), "seed": run.seed, "scores": _finite(scores.metrics),
                      "cached": scores.cached} for run, scores in self.runs],
            "metrics": {m: None if s is None else s.as_dict() for m, s in self.stats.items()},
            "paper": {m: figure.as_dict() for m, figure in self.paper.items()},
        }


def _finite(metrics: dict[str, float | None]) -> dict[str, float | None]:
    return {k: v if v is None or math.isfinite(v) else None for k, v in metrics.items()}


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_flatten(inner, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: value}


def _labels(groups: list[Group]) -> None:
    """Name each group by its model and the recipe values that tell it apart from the model's other groups
    (and by its data folder when only that differs)."""
    flat = [_flatten(g.recipe) for g in groups]
    for group, mine in zip(groups, flat):
        others = [f for g, f in zip(groups, flat) if g.model == group.model and f is not mine]
        differing = sorted({k for f in others for k in set(mine) | set(f) if mine.get(k) != f.get(k)})
        parts = [f"{k.split('.', 1)[-1] if k.startswith(('train.', 'model_config.')) else k}="
                 f"{json.dumps(mine.get(k))}" for k in differing if k != "model"]
        group.label = group.model + (f" ({', '.join(parts)})" if parts else "")
    seen: dict[tuple[str, Path], int] = {}
    for group in groups:
        seen[group.label, group.test] = seen.get((group.label, group.test), 0) + 1
    counters: dict[tuple[str, Path], int] = {}
    for group in groups:  # the same recipe on other data: named by the data folder (or numbered)
        key = (group.label, group.test)
        if seen[key] > 1:
            counters[key] = counters.get(key, 0) + 1
            data = group.runs[0][0].data_dir
            group.label += f" [data {data.name if data else counters[key]}]"


def test_labels(tests: list[Path], given: Sequence[str] = ()) -> dict[Path, str]:
    """Short names of the test files (resolved path → name) for the table, one per file and never one for two:
    ``given`` (one per file, in order; a label given to two files is refused), else each file's stem, with as
    many of its folders in front as tell it from the files of the same stem — an absolute path would run a
    LaTeX table far past the text width."""
    unique = list(dict.fromkeys(path.resolve() for path in tests))
    if given:
        if len(given) != len(tests):
            raise UsageError(f"--label: {len(given)} given for {len(tests)} --test file(s); give one per --test")
        named: dict[Path, str] = {}
        for path, label in zip(tests, given):
            other = next((p for p, known in named.items() if known == label and p != path.resolve()), None)
            if other is not None:
                raise UsageError(f"--label {shown_name(label)} names two test files ({shown_name(other)} and "
                                 f"{shown_name(path)}); give each --test its own --label")
            named[path.resolve()] = label
        return named
    return {path: _short_name(path, [p for p in unique if p.stem == path.stem]) for path in unique}


def _short_name(path: Path, same_stem: list[Path]) -> str:
    """``path``'s stem, behind the fewest of its folders that no other file of ``same_stem`` ends with too."""
    def ending(file: Path, depth: int) -> str:
        return "/".join([*file.parent.parts[len(file.parent.parts) - depth:], file.stem])

    for depth in range(len(path.parent.parts) + 1):
        if [ending(p, depth) for p in same_stem].count(ending(path, depth)) == 1:
            return ending(path, depth)
    return str(path)


def group_runs(scored: list[tuple[Run, Scores]], labels: Mapping[Path, str] | None = None, *,
               labelled: bool = False) -> list[Group]:
    """Groups in the order their first run was given; one per configuration and test file (named by
    ``labels``, default :func:`test_labels`; ``labelled``: those are the user's ``--label`` names)."""
    order: dict[tuple[str, str], Group] = {}
    for run, scores in scored:
        key = (run.configuration_key(), str(scores.test.resolve()))
        if key not in order:
            order[key] = Group(label=run.model, model=run.model, test=scores.test, recipe=run.recipe_without_seed(),
                               runs=[])
        order[key].runs.append((run, scores))
    groups = list(order.values())
    labels = labels or test_labels([g.test for g in groups])
    for group in groups:
        group.test_label = labels.get(group.test.resolve(), group.test.stem)
        group.test_labelled = labelled and group.test.resolve() in labels
        group.runs.sort(key=lambda item: (item[0].seed is None, item[0].seed or 0, str(item[0].path)))
        group.stats = {m: summarize([s.metrics.get(m) for _, s in group.runs]) for m in METRICS}
    _labels(groups)
    return groups


def _stop_point(run: Run) -> tuple[str, int | None]:
    """How and where the run's last (re)start ended: (reason, step) from its manifest."""
    outcome = (run.manifest.get("runs") or [{}])[-1].get("outcome") or {}
    step = outcome.get("step")
    return str(outcome.get("reason") or "unknown"), step if isinstance(step, int) else None


def stop_point_notes(groups: list[Group]) -> list[str]:
    """A note for each group whose runs ended differently (a budget, a signal, early stopping, or at other
    steps): their mean then mixes models trained for different lengths."""
    notes = []
    for group in groups:
        points = {run.path: _stop_point(run) for run, _ in group.runs}
        if len(set(points.values())) > 1:
            said = ", ".join(f"seed {run.seed}: {points[run.path][0]} at step {points[run.path][1]}"
                             for run, _ in group.runs)
            notes.append(f"{group.label}: its runs stopped at different points ({said}); the mean mixes "
                         "models trained for different lengths")
    return notes


def attach_papers(groups: list[Group]) -> list[str]:
    """Give each group the published figures that apply to it; returns the notes on those that do not."""
    notes: list[str] = []
    for group in groups:
        match = paper_figures(group.model, group.runs[0][0].data_dir, group.test)
        group.paper = match.figures
        notes.extend(note for note in match.notes if note not in notes)
    return notes
