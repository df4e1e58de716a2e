"""``depinduce models``: the registered backends and what they can do, the training runs under ./runs (how each
ended, how good it is, which one ``parse`` takes) and the bundled model's card.

The tables fit an 80-column terminal without cutting a name: names, decoder names and checksums are never
shortened (rich would end them in "…"); descriptions wrap instead.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click
from depinduce.cli.common import stdout_console
from rich import box
from rich.table import Table

from depinduce.models.bundled import BUNDLED_NAME, model_card

if TYPE_CHECKING:
    from depinduce.api.runs import RunListing


@click.command("models")
@click.option("--json", "as_json", is_flag=True,
              help="Print machine-readable JSON instead of tables: {backends: [...], runs: [...], bundled_model: "
                   "card}.")
def models_command(as_json: bool) -> None:
    """List the backends registered in the 'depinduce.models' entry-point group, the training runs under ./runs
    (how each ended, its selected dev score beside right-branching's) and the bundled model's card."""
    from depinduce.api.commands import backend_rows, list_models  # reads run folders only when the command runs
    from depinduce.api.runs import list_runs

    warn = lambda line: click.echo(line, err=True)  # noqa: E731
    if as_json:
        click.echo(json.dumps(list_models(warn), indent=2, ensure_ascii=False))
        return
    rows = backend_rows(warn)
    card = model_card()
    listing = list_runs()
    for skipped in listing.skipped:
        warn(skipped)
    console = stdout_console()
    console.print(_backends_table(rows))
    if listing.runs:
        console.print(_runs_table(listing))
    console.print(_card_table(card))


def _backends_table(rows: list[dict]) -> Table:
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


def _card_table(card: dict) -> Table:
    """The bundled model's card: what it is, how it was made, and its scores beside right-branching's."""
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
    table.add_row("decoder", f"{card.get('decoder', 'mst')} (chosen by {card.get('decoder_choice', {}).get('by', '-')})")
    table.add_row("scored by", card["protocol"])
    return table
