"""Learning curves from the runs' ``metrics.jsonl``: a dev metric against step and against wall-clock minutes.

One thin line per run (seed), and per configuration the mean over its runs as a thick line with a ±sd band
(the sample sd over the runs that reached that point; no band where only one did).  Against time, each run is
interpolated onto a common grid within the span it covers.  Wall-clock time is the record's ``wall_s``; records
written before it existed give ``train_s`` plus the evaluations' ``eval_s`` so far (setup not counted).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from depinduce.errors import ResourceError, UsageError
from depinduce.report.runs import Run

SUFFIXES = (".png", ".svg", ".pdf")
_TIME_POINTS = 200


def default_metric(runs: Sequence[Run]) -> str:
    """The metric the runs selected their model by (the most common ``select``), else dev UDA."""
    chosen = Counter(r.metrics[-1].get("select") for r in runs if r.metrics and r.metrics[-1].get("select"))
    return chosen.most_common(1)[0][0] if chosen else "dev_uda"


def curve(run: Run, metric: str) -> tuple[list[float], list[float], list[float]]:
    """(steps, wall-clock minutes, values) of the run's evaluations that measured ``metric``."""
    steps, minutes, values = [], [], []
    eval_total = 0.0
    for record in run.metrics:
        eval_total += float(record.get("eval_s") or 0.0)
        value = record.get(metric)
        if not isinstance(value, (int, float)) or not math.isfinite(value) or "step" not in record:
            continue
        wall = record.get("wall_s")
        seconds = float(wall) if isinstance(wall, (int, float)) else float(record.get("train_s") or 0.0) + eval_total
        steps.append(float(record["step"]))
        minutes.append(seconds / 60.0)
        values.append(float(value))
    return steps, minutes, values


def _mean_sd(columns: list[list[float]]) -> tuple[list[float], list[float]]:
    import statistics

    means = [statistics.fmean(c) if c else math.nan for c in columns]
    sds = [statistics.stdev(c) if len(c) > 1 else 0.0 for c in columns]
    return means, sds


Curve = tuple[list[float], list[float], list[float]]  # steps, minutes, values (or x, mean, sd)


def _by_step(curves: list[Curve]) -> Curve:
    values: dict[float, list[float]] = {}
    for steps, _, ys in curves:
        for x, y in zip(steps, ys):
            values.setdefault(x, []).append(y)
    xs = sorted(values)
    means, sds = _mean_sd([values[x] for x in xs])
    return xs, means, sds


def _by_time(curves: list[Curve]) -> Curve:
    import numpy as np

    spans = [(ts, ys) for _, ts, ys in curves if ts]
    if not spans:
        return [], [], []
    end = max(ts[-1] for ts, _ in spans)
    grid = np.linspace(min(ts[0] for ts, _ in spans), end, _TIME_POINTS)
    columns: list[list[float]] = [[] for _ in grid]
    for ts, ys in spans:
        inside = (grid >= ts[0]) & (grid <= ts[-1])
        for k in np.nonzero(inside)[0]:
            columns[k].append(float(np.interp(grid[k], ts, ys)))
    means, sds = _mean_sd(columns)
    return [float(t) for t in grid], means, sds


def plot_curves(groups: Sequence[tuple[str, Sequence[Run]]], path: Path, *, metric: str | None = None) -> str:
    """Write the two-panel figure to ``path`` (.png, .svg or .pdf); returns the metric plotted."""
    if path.suffix.lower() not in SUFFIXES:
        raise UsageError(f"{path}: --plot writes .png, .svg or .pdf files")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ResourceError("--plot needs matplotlib: pip install 'depinduce[plot]'") from None
    runs = [run for _, members in groups for run in members]
    metric = metric or default_metric(runs)
    curves = {id(run): curve(run, metric) for run in runs}
    if not any(values for _, _, values in curves.values()):
        present = sorted({k for r in runs for rec in r.metrics for k, v in rec.items()
                          if isinstance(v, (int, float)) and not isinstance(v, bool)
                          and k.startswith(("dev_", "train_"))})
        raise UsageError(f"no run's metrics.jsonl records '{metric}'; recorded: {', '.join(present) or 'nothing'}")
    figure, (by_step, by_time) = plt.subplots(1, 2, figsize=(11, 4.2))
    colours = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    for number, (label, members) in enumerate(groups):
        colour = colours[number % len(colours)]
        member_curves = [curves[id(run)] for run in members if curves[id(run)][2]]
        if not member_curves:
            continue
        for steps, minutes, values in member_curves:
            by_step.plot(steps, values, color=colour, linewidth=0.7, alpha=0.45)
            by_time.plot(minutes, values, color=colour, linewidth=0.7, alpha=0.45)
        for axes, (xs, means, sds) in ((by_step, _by_step(member_curves)), (by_time, _by_time(member_curves))):
            axes.plot(xs, means, color=colour, linewidth=2.0, label=f"{label} (n={len(member_curves)})")
            axes.fill_between(xs, [m - s for m, s in zip(means, sds)], [m + s for m, s in zip(means, sds)],
                              color=colour, alpha=0.18, linewidth=0)
    by_step.set_xlabel("step")
    by_time.set_xlabel("wall-clock minutes")
    for axes in (by_step, by_time):
        axes.set_ylabel(metric)
        axes.grid(True, alpha=0.3)
    by_step.legend(fontsize=8, loc="best")
    figure.suptitle(f"{metric}: one thin line per seed, the mean ± sd per configuration", fontsize=10)
    figure.tight_layout()
    try:
        figure.savefig(path)
    except OSError as exc:
        raise ResourceError(f"{path}: cannot write the plot ({exc.strerror or exc})") from None
    finally:
        plt.close(figure)
    return metric
