"""Human-readable rendering of an :class:`~depinduce.metrics.evaluate.EvalResult` with rich.

The table shows percentages with one decimal next to the counts they come from, and the protocol description
(single-sourced in :mod:`depinduce.metrics.protocol`) is always printed underneath, so a number is never shown
without the rules that produced it.  JSON output is ``EvalResult.to_json()``, not this module.
"""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from depinduce.metrics.evaluate import LENGTH_BUCKETS, EvalResult, Scores


def percent(value: float | None) -> str:
    """One-decimal percentage, or an en dash when the metric was not computed."""
    return "–" if value is None else f"{value:.1f}"


def result_table(result: EvalResult) -> Table:
    """The headline metrics of the whole evaluated set, one row per metric with its counts."""
    table = Table(title=f"{result.pred_path} vs {result.gold_path}", title_justify="left")
    table.add_column("metric")
    table.add_column("%", justify="right")
    table.add_column("counts", justify="right", style="dim")
    dep, con = result.overall.dependency, result.overall.constituency
    if dep is not None:
        table.add_row("DDA (UAS)", percent(dep.dda), f"{dep.directed}/{dep.tokens} tokens")
        table.add_row("UDA (UUAS)", percent(dep.uda), f"{dep.undirected}/{dep.tokens} tokens")
        if dep.labelled_tokens:
            table.add_row("LAS", percent(dep.las), f"{dep.labelled}/{dep.labelled_tokens} tokens")
        table.add_row("root accuracy", percent(dep.root_accuracy), f"{dep.root_correct}/{dep.sentences} sentences")
        table.add_row(
            "well-formed trees", percent(dep.well_formed_share), f"{dep.well_formed}/{dep.sentences} sentences"
        )
    if con is not None:
        table.add_row("UF1 sentence-level", percent(con.sentence_f1), f"mean over {con.sentences} sentences")
        table.add_row(
            "UF1 corpus-level",
            percent(con.corpus_f1),
            f"P {percent(con.precision)} R {percent(con.recall)}; "
            f"{con.matched} matched, {con.predicted} predicted, {con.gold} gold spans",
        )
    return table


def label_recall_table(result: EvalResult) -> Table | None:
    """Recall of gold constituents per phrase label, most frequent label first; None for unlabelled gold."""
    con = result.overall.constituency
    if con is None or not con.label_total:
        return None
    table = Table(title="recall by gold label", title_justify="left")
    table.add_column("label")
    table.add_column("recall %", justify="right")
    table.add_column("found/gold", justify="right", style="dim")
    for label in con.labels_by_frequency():
        table.add_row(label, percent(con.label_recall(label)), f"{con.label_found[label]}/{con.label_total[label]}")
    return table


def length_table(result: EvalResult) -> Table:
    """The metrics per sentence-length bucket (lengths count scored words); empty buckets are left out."""
    table = Table(title="by sentence length (scored words)", title_justify="left")
    table.add_column("length")
    table.add_column("sentences", justify="right")
    table.add_column("tokens", justify="right")
    dep_cols = result.overall.dependency is not None
    con_cols = result.overall.constituency is not None
    las_col = dep_cols and bool(result.overall.dependency and result.overall.dependency.labelled_tokens)
    if dep_cols:
        table.add_column("DDA", justify="right")
        table.add_column("UDA", justify="right")
    if las_col:
        table.add_column("LAS", justify="right")
    if con_cols:
        table.add_column("UF1 sent.", justify="right")
        table.add_column("UF1 corpus", justify="right")
    for name, _, _ in LENGTH_BUCKETS:
        scores: Scores | None = result.by_length.get(name)
        if scores is None or not scores.sentences:
            continue
        row = [name.replace("-", "–"), str(scores.sentences), str(scores.tokens)]
        if scores.dependency is not None:
            row += [percent(scores.dependency.dda), percent(scores.dependency.uda)]
            if las_col:
                row.append(percent(scores.dependency.las))
        if scores.constituency is not None:
            row += [percent(scores.constituency.sentence_f1), percent(scores.constituency.corpus_f1)]
        table.add_row(*row)
    return table


def result_renderable(result: EvalResult, *, by_length: bool = False) -> RenderableType:
    """Everything a person reads: headline table, label recall, optional length breakdown, then the protocol."""
    parts: list[RenderableType] = [result_table(result)]
    labels = label_recall_table(result)
    if labels is not None:
        parts.append(labels)
    if by_length:
        parts.append(length_table(result))
    parts.append(Text("Protocol", style="bold"))
    parts.extend(Text(f"- {line}") for line in result.protocol.describe())
    return Group(*parts)


def render_table(result: EvalResult, console: Console, *, by_length: bool = False) -> None:
    """Print the human-readable report of ``result`` to ``console`` (the CLI's non-JSON output)."""
    console.print(result_renderable(result, by_length=by_length))


def report_text(result: EvalResult, *, by_length: bool = False, width: int = 160) -> str:
    """The human-readable report as plain text: what the CLI prints when its stdout is not a terminal (a rich
    console ``width`` wide, soft-wrapped, without colour), for callers that want a string, not a console."""
    import io

    stream = io.StringIO()
    render_table(result, Console(file=stream, soft_wrap=True, width=width), by_length=by_length)
    return stream.getvalue()
