"""Learning curves from the runs' ``metrics.jsonl``: a metric against step, training tokens seen or wall-clock
minutes, its axis titled in words (:data:`TITLES`), fonts embedded as TrueType in PDFs (journals reject Type 3).

One thin line per run (seed), and per configuration the mean over its runs as a thick line with a ±sd band
(the sample sd over the runs), drawn only where every run has a point: from the latest first point to the
earliest last one, so the mean never jumps where a seed stops early (an average over fewer seeds); the legend
and the title say so.  Each run is interpolated onto the steps of that span that some run recorded (against
time or tokens, onto a common grid), so seeds evaluated at the same steps are averaged exactly as recorded.
Wall-clock time is the record's ``wall_s``; records written before it existed give ``train_s`` plus the
evaluations' ``eval_s`` so far (setup not counted).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from depinduce.errors import ResourceError, UsageError
from depinduce.io.outputs import atomic_file, check_new_file
from depinduce.api.reporting.runs import Run

SUFFIXES = (".png", ".svg", ".pdf")
X_AXES = ("step", "tokens", "minutes")
X_TITLES = {"step": "optimisation step", "tokens": "training tokens seen", "minutes": "wall-clock minutes"}
_TIME_POINTS = 200
# metrics.jsonl keys as an axis title says them
TITLES = {"dev_uda": "dev UDA (%)", "dev_dda": "dev DDA (%)", "dev_las": "dev LAS (%)",
          "dev_uf1": "dev UF1, sentence-level (%)", "dev_uf1_corpus": "dev UF1, corpus-level (%)",
          "dev_root_accuracy": "dev root accuracy (%)", "dev_well_formed": "dev well-formed trees (%)",
          "dev_ppl": "dev perplexity", "dev_loss": "dev loss (nats per token)", "train_loss": "training loss",
          "train_ppl": "training perplexity", "lr": "learning rate", "tokens_per_s": "training tokens per second"}
# shared by every backend that parses dev: the default when runs selected by different metrics
_COMMON = ("dev_uda", "dev_uf1", "dev_dda", "dev_ppl")


def title(metric: str) -> str:
    """The axis title of a metrics.jsonl key (``dev_uda`` → "dev UDA (%)"); an unknown key with its
    underscores as spaces."""
    return TITLES.get(metric, metric.replace("_", " "))


def default_metric(runs: Sequence[Run]) -> str:
    """The metric every run selected its model by when they agree on a dev metric; else the first of dev UDA,
    dev UF1, dev DDA, dev perplexity that every run recorded (the most runs, at worst) — never the training
    loss, which backends with different objectives measure on different scales."""
    selected = {next((r.get("select") for r in reversed(run.metrics) if r.get("select")), None) for run in runs}
    if len(selected) == 1 and isinstance(chosen := selected.pop(), str) and chosen.startswith("dev_"):
        return chosen
    recorded = Counter(key for run in runs for key in {k for rec in run.metrics for k, v in rec.items()
                                                       if isinstance(v, (int, float)) and not isinstance(v, bool)})
    return max(_COMMON, key=lambda m: (recorded[m], -_COMMON.index(m))) if recorded else "dev_uda"


def curve(run: Run, metric: str) -> tuple[list[float], list[float], list[float], list[float]]:
    """(steps, wall-clock minutes, values, training tokens seen) of the run's records that hold ``metric``."""
    steps, minutes, values, tokens = [], [], [], []
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
        tokens.append(float(record.get("tokens_seen") or math.nan))
    return steps, minutes, values, tokens


def _mean_sd(columns: list[list[float]]) -> tuple[list[float], list[float]]:
    import statistics

    means = [statistics.fmean(c) if c else math.nan for c in columns]
    sds = [statistics.stdev(c) if len(c) > 1 else 0.0 for c in columns]
    return means, sds


Curve = tuple[list[float], list[float], list[float]]  # steps, minutes, values (or x, mean, sd)


def _common_span(curves: list[Curve]) -> tuple[float, float] | None:
    """From the latest first point to the earliest last point of ``curves`` (x: their second element); None
    when they do not overlap."""
    spans = [along for _, along, _ in curves if along]
    if not spans:
        return None
    start, end = max(xs[0] for xs in spans), min(xs[-1] for xs in spans)
    return (start, end) if start <= end else None


def _mean_over(curves: list[Curve], grid: Sequence[float]) -> Curve:
    """(grid, mean, sd) of every curve interpolated at each ``grid`` point (all within each curve's span)."""
    import numpy as np

    columns = [[float(np.interp(x, along, ys)) for _, along, ys in curves] for x in grid]
    means, sds = _mean_sd(columns)
    return [float(x) for x in grid], means, sds


def mean_curve(curves: list[Curve], x_axis: str = "step") -> Curve:
    """(x, mean, sd) of a configuration's runs, only where every run has a point (:func:`_common_span`): a
    mean over the seeds that happen to go on would jump where one stops.  Against step, at each step some run
    recorded in that span (a run without a record there interpolated between its neighbours); against time or
    tokens, on a grid of :data:`_TIME_POINTS`."""
    import numpy as np

    if x_axis == "step":
        curves = [(steps, steps, ys) for steps, _, ys in curves]
    span = _common_span(curves)
    if span is None:
        return [], [], []
    start, end = span
    if x_axis == "step":
        grid = sorted({x for _, along, _ in curves for x in along if start <= x <= end})
    else:
        grid = [float(x) for x in np.linspace(start, end, _TIME_POINTS)] if end > start else [start]
    return _mean_over(curves, grid)


PLOT_TITLE = "one thin line per seed; thick: the mean ± sd per configuration, only where every seed has a point"


def legend(label: str, curves: list[Curve], x_axis: str) -> str:
    """A configuration's legend entry: its runs, and where its mean ends when a seed stopped before the others
    (the thin lines go on past the thick one), or that it has none when no span is every seed's."""
    if len(curves) < 2:
        return f"{label} (n={len(curves)})"
    if not mean_curve(curves, x_axis)[0]:
        return f"{label} (n={len(curves)}; no mean: no span has a point of every seed)"
    ends = [(steps if x_axis == "step" else along)[-1] for steps, along, _ in curves if steps]
    if min(ends) < max(ends):
        unit = {"step": "step", "tokens": "tokens", "minutes": "min"}[x_axis]
        end = f"step {min(ends):g}" if x_axis == "step" else f"{min(ends):.4g} {unit}"
        return f"{label} (n={len(curves)}; mean to {end}, where the shortest seed ends)"
    return f"{label} (n={len(curves)})"


def _against(points: tuple[list[float], list[float], list[float], list[float]], x_axis: str) -> Curve:
    """One run's curve as (steps, x the mean interpolates over, values): minutes, or for ``tokens`` the tokens
    seen in both places (records without them, from before they were logged, left out)."""
    steps, minutes, values, tokens = points
    if x_axis != "tokens":
        return steps, minutes, values
    kept = [k for k, t in enumerate(tokens) if math.isfinite(t)]
    return [tokens[k] for k in kept], [tokens[k] for k in kept], [values[k] for k in kept]


def plot_curves(groups: Sequence[tuple[str, Sequence[Run]]], path: Path, *, metric: str | None = None,
                force: bool = False, x_axis: str = "step") -> str:
    """Write the figure (``metric`` against ``x_axis``: step, tokens or minutes) to ``path`` (.png, .svg or
    .pdf; an existing file only with ``force``, and atomically); returns the metric plotted."""
    if path.suffix.lower() not in SUFFIXES:
        raise UsageError(f"{path}: --plot writes .png, .svg or .pdf files")
    if x_axis not in X_AXES:
        raise UsageError(f"--x {x_axis}: choose one of {', '.join(X_AXES)}")
    target = check_new_file(path, force)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ResourceError("--plot needs matplotlib: pip install 'depinduce[plot]'") from None
    matplotlib.rcParams.update({"pdf.fonttype": 42, "ps.fonttype": 42})  # TrueType, not Type 3
    runs = [run for _, members in groups for run in members]
    metric = metric or default_metric(runs)
    curves = {id(run): _against(curve(run, metric), x_axis) for run in runs}
    if not any(values for _, _, values in curves.values()):
        present = sorted({k for r in runs for rec in r.metrics for k, v in rec.items()
                          if isinstance(v, (int, float)) and not isinstance(v, bool)
                          and k.startswith(("dev_", "train_"))})
        raise UsageError(f"no run's metrics.jsonl records '{metric}'; recorded: {', '.join(present) or 'nothing'}")
    figure, axes = plt.subplots(1, 1, figsize=(7, 4.2))
    colours = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    for number, (label, members) in enumerate(groups):
        colour = colours[number % len(colours)]
        member_curves = [curves[id(run)] for run in members if curves[id(run)][2]]
        if not member_curves:
            continue
        for steps, along, values in member_curves:
            axes.plot(steps if x_axis == "step" else along, values, color=colour, linewidth=0.7, alpha=0.45)
        xs, means, sds = mean_curve(member_curves, x_axis)
        axes.plot(xs, means, color=colour, linewidth=2.0, label=legend(label, member_curves, x_axis))
        axes.fill_between(xs, [m - s for m, s in zip(means, sds)], [m + s for m, s in zip(means, sds)],
                          color=colour, alpha=0.18, linewidth=0)
    axes.set_xlabel(X_TITLES[x_axis])
    axes.set_ylabel(title(metric))
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8, loc="best")
    axes.set_title(PLOT_TITLE, fontsize=9)
    figure.tight_layout()
    try:
        with atomic_file(target, "wb") as stream:
            figure.savefig(stream, format=path.suffix.lower()[1:])
    finally:
        plt.close(figure)
    return metric
