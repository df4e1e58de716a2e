"""``depinduce models``: the registered backends and what they can do."""

from __future__ import annotations

import json

import click
from depinduce.cli.common import stdout_console
from rich.table import Table

from depinduce.errors import DepinduceError
from depinduce.models.registry import registrations


@click.command("models")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON instead of a table.")
def models_command(as_json: bool) -> None:
    """List the backends registered in the 'depinduce.models' entry-point group."""
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
            }
        )
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="depinduce backends")
    for column in ("name", "dependency", "constituency", "trainable", "supervised", "objective", "provider"):
        table.add_column(column)
    mark = {True: "yes", False: "-"}
    for row in rows:
        table.add_row(
            row["name"],
            *(mark[row[c]] for c in ("dependency", "constituency", "trainable", "supervised")),
            row["objective"],
            row["provider"],
        )
    stdout_console().print(table)
