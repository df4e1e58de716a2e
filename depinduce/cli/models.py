"""``depinduce models``: the registered backends and what they can do."""

from __future__ import annotations

import json

import click
from depinduce.cli.common import stdout_console
from rich.table import Table

from depinduce.errors import DepinduceError
from depinduce.models.bundled import BUNDLED_NAME, model_card
from depinduce.models.registry import registrations


@click.command("models")
@click.option("--json", "as_json", is_flag=True,
              help="Print machine-readable JSON instead of tables: {backends: [...], bundled_model: card}.")
def models_command(as_json: bool) -> None:
    """List the backends registered in the 'depinduce.models' entry-point group, and the bundled model's card."""
    rows = []
    for name, reg in registrations().items():
        try:
            cls = reg.load_class()
        except DepinduceError as exc:  # one broken plugin must not hide the others
            click.echo(f"warning: {exc}", err=True)
            continue
        rows.append(
            {
                "name": name,
                "provider": reg.provider,
                "entry_point": reg.entry_point.value,
                "description": cls.description,
                **cls.capabilities.as_dict(),
                # the authors' decoders; every backend with dependency output also takes mst, eisner, argmax
                "own_decoders": {k: d.description for k, d in cls.own_decoders.items()},
            }
        )
    card = model_card()
    if as_json:
        click.echo(json.dumps({"backends": rows, "bundled_model": card}, indent=2, ensure_ascii=False))
        return
    table = Table(title="depinduce backends")
    for column in ("name", "dependency", "constituency", "trainable", "supervised", "objective",
                   "authors' decoders (--decoder)", "provider"):
        table.add_column(column)
    mark = {True: "yes", False: "-"}
    for row in rows:
        table.add_row(
            row["name"],
            *(mark[row[c]] for c in ("dependency", "constituency", "trainable", "supervised")),
            row["objective"],
            ", ".join(row["own_decoders"]) or "-",
            row["provider"],
        )
    console = stdout_console()
    console.print(table)
    console.print(_card_table(card))


def _card_table(card: dict) -> Table:
    """The bundled model's card: what it is, how it was made, and its scores beside right-branching's."""
    table = Table(title=f"bundled model '{BUNDLED_NAME}' (parse without --model, when ./runs has no finished run)",
                  show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
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
