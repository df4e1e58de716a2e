"""A report as text: an aligned table, Markdown, LaTeX, CSV or JSON.

Every format but CSV and JSON prints the notes under the table — the evaluation protocol, what sd means, where
the paper's figures come from and why some are absent; JSON carries them as lists, CSV (one row per group and
metric, full precision) has only the numbers.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from typing import Any

from depinduce.errors import UsageError
from depinduce.report.aggregate import LABELS, Group, Stat
from depinduce.report.papers import PaperFigure
from depinduce.report.scores import METRICS

FORMATS = ("table", "markdown", "latex", "csv", "json")
DASH = "–"  # an empty cell: not measured, or no sd for a single run
HEADER = ("group", "test", "metric", "n", "mean ± sd", "min", "max", "paper's figure")


def _num(value: float | None) -> str:
    return DASH if value is None or not math.isfinite(value) else f"{value:.2f}"


def _mean_sd(mean: float | None, sd: float | None, pm: str = "±") -> str:
    if mean is None:
        return DASH
    return f"{_num(mean)} {pm} {_num(sd)}" if sd is not None else f"{_num(mean)} {pm} {DASH}"


def rows(groups: Sequence[Group]) -> list[tuple[Group, str, Stat | None, PaperFigure | None]]:
    """(group, metric, its statistics, the paper's figure) for each metric a group measured or the paper has."""
    out = []
    for group in groups:
        for metric in METRICS:
            stat, figure = group.stats.get(metric), group.paper.get(metric)
            if stat is not None or figure is not None:
                out.append((group, metric, stat, figure))
    return out


def _cells(groups: Sequence[Group], pm: str = "±") -> list[list[str]]:
    table = []
    for group, metric, stat, figure in rows(groups):
        table.append([
            group.label, str(group.test), LABELS[metric], str(stat.n) if stat else "0",
            _mean_sd(stat.mean, stat.sd, pm) if stat else DASH, _num(stat.min if stat else None),
            _num(stat.max if stat else None),
            _mean_sd(figure.value, figure.sd, pm) + " (paper)" if figure else DASH,
        ])
    return table


def _text(groups: Sequence[Group], notes: Sequence[str]) -> str:
    table = [list(HEADER), *_cells(groups)]
    widths = [max(len(row[k]) for row in table) for k in range(len(HEADER))]
    numeric = {3, 4, 5, 6}
    lines = []
    for number, row in enumerate(table):
        lines.append("  ".join(cell.rjust(w) if k in numeric and number else cell.ljust(w)
                               for k, (cell, w) in enumerate(zip(row, widths))).rstrip())
        if number == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines + [""] + list(notes)) + "\n"


def _markdown(groups: Sequence[Group], notes: Sequence[str]) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    out = [line(HEADER), "|" + "|".join(["---", "---", "---", "--:", "--:", "--:", "--:", "---"]) + "|"]
    out += [line(cells) for cells in _cells(groups)]
    return "\n".join(out + [""] + [f"- {note}" for note in notes]) + "\n"


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "–": "--",
                  "±": r"$\pm$", "−": "--"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def _latex(groups: Sequence[Group], notes: Sequence[str]) -> str:
    header = ["Group", "Test", "Metric", "$n$", r"Mean $\pm$ sd", "Min", "Max", "Paper's figure"]
    out = [r"\begin{tabular}{lllrrrrl}", r"\toprule", " & ".join(header) + r" \\", r"\midrule"]
    out += [" & ".join(latex_escape(cell) for cell in cells) + r" \\" for cells in _cells(groups)]
    out += [r"\bottomrule", r"\end{tabular}"]
    out += [r"\par\noindent{\footnotesize " + latex_escape(note) + "}" for note in notes]
    return "\n".join(out) + "\n"


def _csv(groups: Sequence[Group]) -> str:
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(["group", "model", "test", "metric", "n", "mean", "sd", "min", "max", "paper", "paper_sd",
                     "paper_source"])

    def full(value: float | None) -> str:
        return "" if value is None or not math.isfinite(value) else repr(float(value))

    for group, metric, stat, figure in rows(groups):
        writer.writerow([group.label, group.model, str(group.test), metric, stat.n if stat else 0,
                         full(stat.mean if stat else None), full(stat.sd if stat else None),
                         full(stat.min if stat else None), full(stat.max if stat else None),
                         full(figure.value if figure else None), full(figure.sd if figure else None),
                         figure.source if figure else ""])
    return stream.getvalue()


def as_dict(groups: Sequence[Group], notes: Sequence[str], protocol: Sequence[str]) -> dict[str, Any]:
    return {"groups": [group.as_dict() for group in groups], "protocol": list(protocol), "notes": list(notes)}


def render(groups: Sequence[Group], fmt: str, *, notes: Sequence[str], protocol: Sequence[str]) -> str:
    """The report in ``fmt`` (one of :data:`FORMATS`); ``notes`` are printed under the table."""
    lines = [f"protocol: {line}" for line in protocol] + list(notes)
    if fmt == "table":
        return _text(groups, lines)
    if fmt == "markdown":
        return _markdown(groups, lines)
    if fmt == "latex":
        return _latex(groups, lines)
    if fmt == "csv":
        return _csv(groups)
    if fmt == "json":
        return json.dumps(as_dict(groups, notes, protocol), indent=2, ensure_ascii=False) + "\n"
    raise UsageError(f"unknown report format '{fmt}'; choose one of {', '.join(FORMATS)}")
