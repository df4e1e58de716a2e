"""A report as text: an aligned table, Markdown, LaTeX, CSV or JSON.

Two layouts: ``long`` (one row per group and metric, with n, min, max and the paper's figure) and ``wide`` (one
row per group, one column per metric: the models × metrics table papers print, the paper's figures as rows of
their own).  Every format but CSV and JSON prints the notes under the table unless told not to — the
evaluation protocol grouped by metric family (dependency lines together, UF1 lines together), what sd means,
where the paper's figures come from and why some are absent; JSON carries them as lists, CSV (one row per group
and metric, full precision) has only the numbers.  LaTeX is ASCII-only, so it compiles under pdflatex.
"""

from __future__ import annotations

import csv
import io
import math
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from depinduce.display import csv_cell, json_text, latex_text, markdown_cell, markdown_text, printable
from depinduce.errors import UsageError
from depinduce.api.reporting.aggregate import LABELS, Group, Stat
from depinduce.api.reporting.papers import PaperFigure
from depinduce.api.reporting.runs import shown_path
from depinduce.api.reporting.scores import METRICS

FORMATS = ("table", "markdown", "latex", "csv", "json")
LAYOUTS = ("long", "wide")
DASH = "–"  # an empty cell: not measured
HEADER = ("group", "test", "metric", "n", "mean ± sd", "min", "max", "paper's figure")
PROTOCOL_TITLES = {"dependency": "Dependency protocol (DDA, UDA, LAS)", "uf1": "UF1 protocol (constituency)"}


def _num(value: float | None) -> str:
    return DASH if value is None or not math.isfinite(value) else f"{value:.2f}"


def _mean_sd(mean: float | None, sd: float | None, pm: str = "±") -> str:
    """``mean ± sd``; a single run (no sd) shows its value alone."""
    if mean is None:
        return DASH
    return f"{_num(mean)} {pm} {_num(sd)}" if sd is not None else _num(mean)


def split_protocol(lines: Sequence[str]) -> dict[str, list[str]]:
    """The protocol lines by metric family: the UF1 evaluation's lines start with "UF1" (see
    :func:`depinduce.api.reporting.scores.measure`), every other line is the dependency evaluation's."""
    out: dict[str, list[str]] = {"dependency": [], "uf1": []}
    for line in lines:
        out["uf1" if line.startswith("UF1") else "dependency"].append(line)
    return out


def note_blocks(protocol: Sequence[str], notes: Sequence[str]) -> list[tuple[str, list[str]]]:
    """(title, lines) for each non-empty block printed under the table: the protocols, then the notes."""
    blocks = [(PROTOCOL_TITLES[family], lines) for family, lines in split_protocol(protocol).items() if lines]
    return blocks + ([("Notes", list(notes))] if notes else [])


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
            group.label, group.test_label, LABELS[metric], str(stat.n) if stat else "0",
            _mean_sd(stat.mean, stat.sd, pm) if stat else DASH, _num(stat.min if stat else None),
            _num(stat.max if stat else None),
            _mean_sd(figure.value, figure.sd, pm) + " (paper)" if figure else DASH,
        ])
    return table


def wide_metrics(groups: Sequence[Group]) -> list[str]:
    """The metrics some group measured or has a paper's figure for, in :data:`METRICS` order."""
    return [m for m in METRICS if any(g.stats.get(m) is not None or m in g.paper for g in groups)]


def _wide_table(groups: Sequence[Group], pm: str = "±") -> tuple[list[str], list[list[str]], set[int]]:
    """(header, rows, numeric columns) of the models × metrics table: one row per group (its n: the runs; a
    metric fewer runs measured says its own n), a row per group with the paper's figures below it, and the test
    column when the groups were scored on more than one test file or the test file has a ``--label`` (the
    reader of a one-file table must still learn its name)."""
    metrics = wide_metrics(groups)
    with_test = (len({g.test.resolve() for g in groups}) > 1  # files, not labels: two are never one column
                 or any(g.test_labelled for g in groups))
    header = ["model", *(["test"] if with_test else []), "n", *(LABELS[m] for m in metrics)]
    table = []
    for group in groups:
        cells = []
        for metric in metrics:
            stat = group.stats.get(metric)
            cell = _mean_sd(stat.mean, stat.sd, pm) if stat else DASH
            cells.append(cell + (f" (n={stat.n})" if stat and stat.n != group.n else ""))
        table.append([group.label, *([group.test_label] if with_test else []), str(group.n), *cells])
        if group.paper:
            figures = [group.paper.get(m) for m in metrics]
            table.append([f"{group.model} (paper)", *([group.test_label] if with_test else []), DASH,
                          *(_mean_sd(f.value, f.sd, pm) if f else DASH for f in figures)])
    first_number = 2 if with_test else 1
    return header, table, set(range(first_number, len(header)))


def _table(groups: Sequence[Group], layout: str, pm: str = "±") -> tuple[list[str], list[list[str]], set[int]]:
    if layout == "wide":
        return _wide_table(groups, pm)
    return list(HEADER), _cells(groups, pm), {3, 4, 5, 6}


def _text(groups: Sequence[Group], blocks: Sequence[tuple[str, list[str]]], layout: str) -> str:
    header, cells, numeric = _table(groups, layout)
    table = [header, *([printable(cell) for cell in row] for row in cells)]
    widths = [max(len(row[k]) for row in table) for k in range(len(header))]
    lines = []
    for number, row in enumerate(table):
        lines.append("  ".join(cell.rjust(w) if k in numeric and number else cell.ljust(w)
                               for k, (cell, w) in enumerate(zip(row, widths))).rstrip())
        if number == 0:
            lines.append("  ".join("-" * w for w in widths))
    for title, notes in blocks:
        lines += ["", f"{title}:", *(f"- {printable(note)}" for note in notes)]
    return "\n".join(lines) + "\n"


def _markdown(groups: Sequence[Group], blocks: Sequence[tuple[str, list[str]]], layout: str) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(markdown_cell(cell) for cell in cells) + " |"

    header, cells, numeric = _table(groups, layout)
    out = [line(header), "|" + "|".join("--:" if k in numeric else "---" for k in range(len(header))) + "|"]
    out += [line(row) for row in cells]
    for title, notes in blocks:
        out += ["", f"**{markdown_text(title)}**", "", *(f"- {markdown_text(note)}" for note in notes)]
    return "\n".join(out) + "\n"


_TYPOGRAPHY = {"–": "--", "—": "---", "±": r"$\pm$", "−": "$-$", "∩": r"$\cap$", "∪": r"$\cup$",
               "×": r"$\times$", "→": r"$\rightarrow$", "←": r"$\leftarrow$", "≤": r"$\leq$", "≥": r"$\geq$",
               "≈": r"$\approx$", "·": r"$\cdot$", "…": r"\ldots{}", "‘": "`", "’": "'", "“": "``", "”": "''",
               "°": r"$^\circ$", "µ": r"$\mu$", "\u00a0": "~"}
# ASCII that pdflatex would turn into other characters: "--" into an en dash (an option's "--" must stay two
# hyphens), "`" and "''" into curly quotes (the PTB tokens `` and '' must stay themselves)
_LIGATURES = re.compile(r"-(?=-)|`|'(?=')|(?<=')'")
_LIGATURE_BREAKS = {"-": "-{}", "`": r"\textasciigrave{}", "'": r"\textquotesingle{}"}
# `code` as the notes write it (Markdown's rule: a run of backticks closed by a run of the same length)
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def _ascii(ch: str) -> str:
    """An ASCII stand-in for one character pdflatex would reject: typeset, else its accent-free letter, else
    its code point."""
    if ch.isascii():
        return ch
    if ch in _TYPOGRAPHY:
        return _TYPOGRAPHY[ch]
    plain = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
    return plain or f"[U+{ord(ch):04X}]"


def latex_escape(text: str) -> str:
    """Every LaTeX special character escaped (:func:`depinduce.display.latex_text`), the ligatures that would
    change what the text says broken (``--`` stays two hyphens, backticks and ``''`` stay themselves) and the
    text made ASCII (dashes, ±, ∩ … typeset): pdflatex without inputenc tricks compiles it."""
    escaped = _LIGATURES.sub(lambda m: _LIGATURE_BREAKS[m.group()], latex_text(text))
    return "".join(_ascii(ch) for ch in escaped)


def latex_note(text: str) -> str:
    """A note as LaTeX: :func:`latex_escape`, with each `code` span (an option, a command) in typewriter type
    and a line break allowed after each ``/`` of the prose, so a path cannot run past the margin."""
    out, start = [], 0
    for match in _CODE_SPAN.finditer(text):
        out.append(latex_escape(text[start:match.start()]).replace("/", r"/\allowbreak{}"))
        out.append(r"\texttt{" + latex_escape(match.group(2).strip()) + "}")
        start = match.end()
    out.append(latex_escape(text[start:]).replace("/", r"/\allowbreak{}"))
    return "".join(out)


_LATEX_HEADER = {"n": "$n$", "UF1 (sentence)": "UF1 sent.", "UF1 (corpus)": "UF1 corp.", "perplexity": "PPL"}


def _latex(groups: Sequence[Group], blocks: Sequence[tuple[str, list[str]]], layout: str) -> str:
    header, cells, numeric = _table(groups, layout, pm="±")
    spec = "".join("r" if k in numeric else "l" for k in range(len(header)))
    # small type and narrower column gaps: a models x metrics table fits a one-column article's text width
    out = [r"\noindent{\small\setlength{\tabcolsep}{4pt}%", rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
           " & ".join(_LATEX_HEADER.get(cell) or latex_escape(cell[:1].upper() + cell[1:]) for cell in header)
           + r" \\", r"\midrule"]
    out += [" & ".join(latex_escape(cell) for cell in row) + r" \\" for row in cells]
    out += [r"\bottomrule", r"\end{tabular}}"]
    for title, notes in blocks:  # each block a list: one item a note, never one paragraph of them run together
        out += [r"\par\smallskip\noindent{\footnotesize\sloppy\textbf{" + latex_escape(title) + ".}",
                r"\begin{itemize}\setlength{\itemsep}{0pt}\setlength{\parskip}{0pt}",
                *(r"\item " + latex_note(note) for note in notes), r"\end{itemize}}"]
    return "\n".join(out) + "\n"


def _csv(groups: Sequence[Group]) -> str:
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(["group", "model", "test", "test_label", "metric", "n", "mean", "sd", "min", "max", "paper", "paper_sd",
                     "paper_source"])

    def full(value: float | None) -> str:
        return "" if value is None or not math.isfinite(value) else repr(float(value))

    for group, metric, stat, figure in rows(groups):
        writer.writerow([csv_cell(group.label), csv_cell(group.model), csv_cell(shown_path(group.test)),
                         csv_cell(group.test_label), metric,
                         stat.n if stat else 0,
                         full(stat.mean if stat else None), full(stat.sd if stat else None),
                         full(stat.min if stat else None), full(stat.max if stat else None),
                         full(figure.value if figure else None), full(figure.sd if figure else None),
                         csv_cell(figure.source) if figure else ""])
    return stream.getvalue()


def as_dict(groups: Sequence[Group], notes: Sequence[str], protocol: Sequence[str]) -> dict[str, Any]:
    return {"groups": [group.as_dict() for group in groups], "protocol": list(protocol),
            "protocol_by_family": split_protocol(protocol), "notes": list(notes)}


def render(groups: Sequence[Group], fmt: str, *, notes: Sequence[str], protocol: Sequence[str],
           layout: str = "long", show_notes: bool = True) -> str:
    """The report in ``fmt`` (one of :data:`FORMATS`) and ``layout`` (one of :data:`LAYOUTS`); the protocol and
    ``notes`` are printed under the table when ``show_notes``."""
    if layout not in LAYOUTS:
        raise UsageError(f"unknown report layout '{layout}'; choose one of {', '.join(LAYOUTS)}")
    blocks = note_blocks(protocol, notes) if show_notes else []
    if fmt == "table":
        return _text(groups, blocks, layout)
    if fmt == "markdown":
        return _markdown(groups, blocks, layout)
    if fmt == "latex":
        return _latex(groups, blocks, layout)
    if fmt == "csv":
        return _csv(groups)
    if fmt == "json":
        return json_text(as_dict(groups, notes, protocol), indent=2) + "\n"
    raise UsageError(f"unknown report format '{fmt}'; choose one of {', '.join(FORMATS)}")
