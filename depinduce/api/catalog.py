"""``depinduce models`` from Python: the registered backends and what they can do, the training runs under
./runs (how each ended, how good it is, which one ``parse`` takes) and the bundled model's card.

:func:`model_catalog` is what the command calls: its tables (:meth:`ModelCatalog.render`) and its ``--json``
(:func:`list_models`, the same as :meth:`ModelCatalog.as_dict`).  The tables fit an 80-column terminal without
cutting a name: names, decoder names and checksums are never shortened (rich would end them in "…");
descriptions wrap instead.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from depinduce.api.runs import RunListing, list_runs
from depinduce.api.words import python_words
from depinduce.errors import DepinduceError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

Warn = Callable[[str], object]


def _quiet(line: str) -> None:
    """The default ``warn``: Python callers get no warnings unless they ask for them."""


def backend_rows(warn: Warn = _quiet) -> list[dict[str, Any]]:
    """One record per backend of the ``depinduce.models`` entry points: name, provider, description,
    capabilities, ``head_probs`` (what ``--probs`` reads) and the authors' decoders.  A broken plugin is
    passed to ``warn`` and left out, so it never hides the others."""
    from depinduce.models.registry import GROUP, registrations, scan_entry_points

    for problem in scan_entry_points(GROUP)[1]:  # a distribution with damaged metadata: its plugins are ignored
        warn(problem)
    rows = []
    for name, reg in registrations().items():
        try:
            cls = reg.load_class()
        except DepinduceError as exc:
            warn(f"warning: {exc}")
            continue
        rows.append({
            "name": name,
            "provider": reg.provider,
            "entry_point": reg.entry_point.value,
            "description": cls.description,
            **cls.capabilities.as_dict(),
            "head_probs": cls.head_probs,
            # the authors' decoders; every backend with dependency output also takes mst, eisner, argmax
            "own_decoders": {k: d.description for k, d in cls.own_decoders.items()},
        })
    return rows


@dataclass(frozen=True)
class ModelCatalog:
    """What ``depinduce models`` shows: ``backends`` (see :func:`backend_rows`), ``runs`` (the runs under ./runs
    and the one ``parse`` takes) and ``bundled_model`` (the bundled model's card)."""

    backends: list[dict[str, Any]]
    runs: RunListing
    bundled_model: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        """The document ``depinduce models --json`` prints; each run has ``parse_default``."""
        runs = [{**run.as_dict(), "parse_default": run.path == self.runs.parse_default} for run in self.runs.runs]
        return {"backends": self.backends, "runs": runs, "bundled_model": self.bundled_model}

    def render(self, console: Console) -> None:
        """Print the backends' table, the runs' (when there is a run) and the card's to ``console``: the
        command's output."""
        console.print(_backends_table(self.backends))
        if self.runs.runs:
            console.print(_runs_table(self.runs))
        console.print(_card_table(self.bundled_model))

    def report(self, *, width: int = 160) -> str:
        """The text ``depinduce models`` prints when its output is not a terminal."""
        from rich.console import Console

        stream = io.StringIO()
        self.render(Console(file=stream, soft_wrap=True, width=width))
        return stream.getvalue()

    def __str__(self) -> str:
        return self.report()


@python_words
def model_catalog(warn: Warn = _quiet) -> ModelCatalog:
    """``depinduce models``: every registered backend, the runs under ./runs and the bundled model's card.
    A broken plugin or a damaged run is passed to ``warn`` (default: dropped) and left out."""
    from depinduce.models.bundled import model_card

    backends = backend_rows(warn)
    card = model_card()
    listing = list_runs()
    for skipped in listing.skipped:
        warn(skipped)
    return ModelCatalog(backends, listing, card)


@python_words
def list_models(warn: Warn = _quiet) -> dict[str, Any]:
    """What ``depinduce models --json`` prints: ``backends`` (see :func:`backend_rows`), ``runs`` (the runs
    under ./runs, ``parse_default`` marking the one ``parse`` takes) and ``bundled_model`` (its card)."""
    from depinduce.models.bundled import model_card

    listing = list_runs()
    for skipped in listing.skipped:  # the runs' warnings first, as the command always printed them
        warn(skipped)
    return ModelCatalog(backend_rows(warn), listing, model_card()).as_dict()


def _backends_table(rows: list[dict[str, Any]]) -> Table:
    """One row per backend; names and decoder names whole at any width (the columns that wrap are the others)."""
    cells = []
    for row in rows:
        output = ", ".join(kind for kind, key in (("deps", "dependency"), ("trees", "constituency")) if row[key])
        training = row["objective"] if row["trainable"] else "-"
        if row["supervised"] and training != "supervised":
            training += " (supervised)"
        cells.append([row["name"], output or "-", training, "\n".join(row["own_decoders"]) or "-", row["provider"]])
    return _table("depinduce backends", ["name", "output", "training", "authors' decoders\n(--decoder)", "provider"],
                  cells, names=(0, 3))


def _table(title: str, header: list[str], cells: list[list[str]], names: tuple[int, ...] = (0,)) -> Table:
    """A table that never cuts a name: the ``names`` columns (backends, decoders, runs: one per line) keep their
    width, the others wrap between words and are at least as wide as their longest word.  rich would otherwise
    squeeze the widest columns of an 80-column terminal into "struct…"."""
    from rich import box
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for k, name in enumerate(header):
        words = [word for text in (name, *(row[k] for row in cells)) for word in text.split()]
        table.add_column(name, no_wrap=k in names, min_width=max(map(len, words), default=1), overflow="fold")
    for row in cells:
        table.add_row(*row)
    return table


def _runs_table(listing: RunListing) -> Table:
    """The runs under ./runs: how each ended and its selected dev score beside right-branching's (where the run
    recorded it), ``parse``'s default marked."""
    cells = []
    for run in listing.runs:
        scores = run.scores() + ("; BELOW right-branching" if run.below_baseline else "")
        mark = " *" if run.path == listing.parse_default else ""
        cells.append([f"{run.path}{mark}", run.model or "?", run.ending(), scores])
    return _table(f"training runs under {listing.root}/ (* = what parse uses without --model)",
                  ["run", "model", "how it ended", "selected dev score"], cells)


def _card_table(card: dict[str, Any]) -> Table:
    """The bundled model's card: what it is, how it was made, and its scores beside right-branching's."""
    from rich.table import Table

    from depinduce.models.bundled import BUNDLED_NAME

    table = Table(title=f"bundled model '{BUNDLED_NAME}' (parse without --model, when ./runs has no finished run)",
                  show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")  # sha256 digests have no space to wrap at: fold, never cut
    table.add_row("model", f"{card['backend']}: {card['summary']}")
    table.add_row("weights licence", card["licence"])
    table.add_row("trained on", card["training"]["data"])
    for k, command in enumerate(card["training"]["commands"]):
        table.add_row("commands" if k == 0 else "", command)
    for name, digest in card["training"]["data_sha256"].items():
        table.add_row(f"sha256 {name}", digest)
    table.add_row("sha256 model.pt", card["model_sha256"])
    for result in card["results"]:
        ours, baseline = result["model"], result["right-branching"]
        table.add_row(result["data"], f"DDA {ours['dda']:.1f} / UDA {ours['uda']:.1f}   "
                                      f"(right-branching {baseline['dda']:.1f} / {baseline['uda']:.1f})")
    chosen_by = card.get("decoder_choice", {}).get("by", "-")
    table.add_row("decoder", f"{card.get('decoder', 'mst')} (chosen by {chosen_by})")
    table.add_row("scored by", card["protocol"])
    return table
