"""``depinduce analyze heads`` and ``analyze channels`` from Python: :func:`analyze_heads` and
:func:`analyze_channels` are what the commands call, and their results print the commands' tables (``report()``)
and JSON (``as_dict()``), so a notebook sees the numbers the command line prints.
"""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from depinduce.display import json_text
from depinduce.api.words import python_words
from depinduce.errors import InputError, ModelError, UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from depinduce.analysis.channels import ChannelReport
    from depinduce.analysis.heads import HeadLabelCorrelation
    from depinduce.api.parser import Parser

# A run directory or backend name (what ``--model`` takes), or a loaded :class:`~depinduce.api.parser.Parser`.
ModelInput = Union[str, "PathLike[str]", "Parser"]

HEADS_NOTE = ("PCC = Pearson correlation over gold edges between a head's controller probability and the label's "
              "indicator; punctuation removed as in eval, labels on their universal part.")
CHANNELS_NOTE = ("Punctuation removed as in eval; labels on their universal part; a word counts for its label when "
                 "the channel's decoded head is its gold head.")


def _text(result: HeadAnalysis | ChannelAnalysis, width: int) -> str:
    """What ``result.render`` prints, as the command line prints it when its stdout is not a terminal."""
    from rich.console import Console

    stream = io.StringIO()
    result.render(Console(file=stream, soft_wrap=True, width=width))
    return stream.getvalue()


@dataclass
class HeadAnalysis:
    """Pearson correlations of every attention head with every gold label (``correlation``: the full matrix,
    every label); the table and ``as_dict()`` show the ``top`` most frequent labels, as ``--labels`` does."""

    correlation: HeadLabelCorrelation
    top: int = 15

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The shown labels, most frequent first: label, edges, the best head (``L1.H2``) and its PCC (None where
        no correlation is defined)."""
        from depinduce.analysis.heads import head_name

        full, rows = self.correlation, []
        for row in range(min(self.top, len(full.labels))):
            best = full.best(row)
            rows.append({"label": full.labels[row], "edges": full.counts[row],
                         "head": None if best is None else head_name(best[0]),
                         "pcc": None if best is None else best[1]})
        return rows

    def as_dict(self) -> dict[str, Any]:
        """The document ``analyze heads --json`` prints."""
        return {"edges": self.correlation.edges, "direction": self.correlation.direction, "labels": self.rows}

    def to_json(self) -> str:
        """``analyze heads --json``'s output (without its final newline)."""
        return json_text(self.as_dict(), indent=2)

    def render(self, console: Console) -> None:
        """Print the table and its note to ``console`` (the command's output)."""
        from rich.table import Table

        table = Table(title=f"Most correlated head per gold label ({self.correlation.direction}, "
                            f"{self.correlation.edges:,} edges)")
        for name, justify in (("label", "left"), ("edges", "right"), ("head", "left"), ("PCC", "right")):
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for row in self.rows:
            table.add_row(row["label"], f"{row['edges']:,}", row["head"] or "-",
                          "-" if row["pcc"] is None else f"{row['pcc']:.2f}")
        console.print(table)
        console.print(HEADS_NOTE)

    def report(self, *, width: int = 160) -> str:
        """The text ``depinduce analyze heads`` prints when its output is not a terminal."""
        return _text(self, width)

    def __str__(self) -> str:
        return self.report()


@dataclass
class ChannelAnalysis:
    """DDA/UDA of every head channel and of their average, and the channel that attaches each gold label best
    (``channels``: every figure); the label table shows the ``top`` most frequent labels, as ``--labels`` does."""

    channels: ChannelReport
    top: int = 15

    @property
    def best_channel(self) -> int:
        """The channel with the highest DDA (what ``parse --channel`` / ``load(channel=)`` would take)."""
        return self.channels.best_overall()

    def as_dict(self) -> dict[str, object]:
        """The document ``analyze channels --json`` prints (every label)."""
        return self.channels.to_dict()

    def to_json(self) -> str:
        """``analyze channels --json``'s output (without its final newline)."""
        return json_text(self.as_dict(), indent=2)

    def render(self, console: Console) -> None:
        """Print the accuracy table, the best channel and the label table to ``console`` (the command's output)."""
        from rich.table import Table

        from depinduce.analysis.channels import AVERAGE
        from depinduce.metrics.report import percent

        def name(view: int | str) -> str:
            return "avg" if view == AVERAGE else str(view)

        report = self.channels
        scores = Table(title=f"Per-channel accuracy ({report.decoder}, {report.counts[0].tokens:,} scored words)",
                       title_justify="left")
        for column in ("channel", "DDA", "UDA", "root acc.", "well-formed"):
            scores.add_column(column, justify="right")
        for view, counts in zip(report.views, report.counts):
            scores.add_row(name(view), percent(counts.dda), percent(counts.uda), percent(counts.root_accuracy),
                           percent(counts.well_formed_share))
        console.print(scores)
        console.print(f"Best channel by DDA: {self.best_channel} (parse --channel {self.best_channel}); "
                      "choose on dev data, never on test data.")
        if not report.labels:
            console.print("The gold file has no dependency labels: no label table.")
            return
        table = Table(title="Directed accuracy per gold label and channel (%)", title_justify="left",
                      padding=(0, 1))
        table.add_column("label")
        table.add_column("words", justify="right")
        table.add_column("best", justify="right")
        for view in report.views:
            table.add_column(name(view), justify="right")
        for row in range(min(self.top, len(report.labels))):
            best, _ = report.best_channel(row)
            cells = []
            for k, view in enumerate(report.views):
                text = percent(report.accuracy(row, k))
                cells.append(f"[bold]{text}[/bold]" if view == best else text)
            table.add_row(report.labels[row], f"{report.label_words[row]:,}", "–" if best is None else str(best),
                          *cells)
        console.print(table)
        console.print(CHANNELS_NOTE)

    def report(self, *, width: int = 160) -> str:
        """The text ``depinduce analyze channels`` prints when its output is not a terminal."""
        return _text(self, width)

    def __str__(self) -> str:
        return self.report()


def _backend(model: ModelInput, device: str) -> tuple[Any, str]:
    """The backend to analyse and how errors name it (the run directory or name, as ``--model`` gave it)."""
    from depinduce.api.parser import Parser
    from depinduce.models.registry import load_model

    if isinstance(model, Parser):
        return model.backend, str(model.run_dir or model.name)
    if not isinstance(model, (str, PathLike)):
        raise UsageError(f"model: expected a run directory, a backend name or a Parser, not "
                         f"{type(model).__name__}")
    return load_model(str(model), device=device), str(model)


def _bar(total: int, progress: bool) -> Any:
    """The commands' progress bar on stderr (shown only on a terminal); none unless ``progress``."""
    from tqdm import tqdm

    return tqdm(total=total, unit="sent", file=sys.stderr, disable=True if not progress else None, leave=False)


@python_words
def analyze_heads(model: ModelInput, gold: str | PathLike[str], *, top: int = 15,
                  direction: str = "child-to-parent", csv: str | PathLike[str] | None = None,
                  plot: str | PathLike[str] | None = None, batch_size: int = 32, device: str = "cpu",
                  force: bool = False, progress: bool = False) -> HeadAnalysis:
    """``depinduce analyze heads``: the Pearson correlation of every attention head's controller probability
    with every gold dependency label over the gold edges of ``gold`` (labelled CoNLL-U; the UDGN paper's
    Table 3).  ``model`` is a UDGN run (or a :class:`Parser` of one); ``csv`` and ``plot`` (.png/.svg/.pdf) also
    write the full matrix, an existing file only with ``force`` (checked before any work)."""
    from depinduce.analysis.heads import correlate, edge_features, save_heatmap
    from depinduce.io import read_sentences
    from depinduce.io.outputs import check_new_file

    for path in (csv, plot):  # before any work: a refusal costs nothing
        if path is not None:
            check_new_file(path, force)
    sentences = read_sentences(gold, fmt="conllu")
    if not any(s.deprels and any(label not in ("_", "") for label in s.deprels) for s in sentences):
        raise InputError(str(gold), None, "no dependency labels to correlate with (DEPREL is empty)")
    backend, named = _backend(model, device)
    if not callable(getattr(backend, "controller_probabilities", None)):
        raise ModelError(f"model {named} ({backend.name}) has no competitive heads to analyse; "
                         "analyze heads needs a UDGN run")
    with _bar(len(sentences), progress) as bar:
        features, labels, heads = edge_features(backend, sentences, direction=direction, batch_size=batch_size,
                                                progress=bar.update)
    full = correlate(features, labels, heads, top=None, direction=direction)
    if csv is not None:
        full.write_csv(Path(csv), force=force)
    if plot is not None:
        save_heatmap(full, Path(plot), force=force)
    return HeadAnalysis(full, top)


@python_words
def analyze_channels(model: ModelInput, gold: str | PathLike[str], *, decoder: str = "mst", top: int = 15,
                     batch_size: int = 32, device: str = "cpu", progress: bool = False) -> ChannelAnalysis:
    """``depinduce analyze channels``: DDA/UDA of every head channel and of their average on ``gold`` (CoNLL-U
    with heads), scored as ``parse --channel K`` + ``eval`` would, and which channel attaches each gold label
    best.  ``model`` is a run of a backend with several head channels (probformer) or a :class:`Parser` of one.
    Choose a channel on dev data, never on test data."""
    from depinduce.analysis.channels import analyze_channels as score_channels
    from depinduce.analysis.channels import has_channels
    from depinduce.io import read_sentences

    backend, named = _backend(model, device)
    if not has_channels(backend):
        raise ModelError(f"model {named} ({backend.name}) has no head channels to analyse; "
                         "analyze channels needs a backend with several head channels (probformer)")
    sentences = read_sentences(gold, fmt="conllu")
    with _bar(len(sentences), progress) as bar:
        report = score_channels(backend, sentences, decoder=decoder, batch_size=batch_size, gold_path=str(gold),
                                progress=bar.update)
    return ChannelAnalysis(report, top)
