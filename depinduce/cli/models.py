"""``depinduce models``: the registered backends and what they can do, the training runs under ./runs (how each
ended, how good it is, which one ``parse`` takes) and the bundled model's card.

Thin: the listing and its tables are :func:`depinduce.api.catalog.model_catalog`, its ``--json``
:func:`depinduce.api.catalog.list_models`.
"""

from __future__ import annotations

import json

import click
from depinduce.cli.common import stdout_console


@click.command("models")
@click.option("--json", "as_json", is_flag=True,
              help="Print machine-readable JSON instead of tables: {backends: [...], runs: [...], bundled_model: "
                   "card}.")
def models_command(as_json: bool) -> None:
    """List the backends registered in the 'depinduce.models' entry-point group, the training runs under ./runs
    (how each ended, its selected dev score beside right-branching's) and the bundled model's card."""
    from depinduce.api.catalog import list_models, model_catalog  # reads run folders only when the command runs

    warn = lambda line: click.echo(line, err=True)  # noqa: E731
    if as_json:
        click.echo(json.dumps(list_models(warn), indent=2, ensure_ascii=False))
        return
    model_catalog(warn).render(stdout_console())
