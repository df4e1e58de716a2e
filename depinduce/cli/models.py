"""``depinduce models``: the registered backends and what they can do, the training runs under ./runs (how each
ended, how good it is, which one ``parse`` takes) and the bundled model's card.

Thin: the listing and its tables are :func:`depinduce.api.catalog.model_catalog`, its ``--json``
:func:`depinduce.api.catalog.list_models`.
"""

from __future__ import annotations

import click

from depinduce.cli.common import stdout_console
from depinduce.display import json_text, say


@click.command("models")
@click.option("--json", "as_json", is_flag=True,
              help="Print machine-readable JSON instead of tables: {backends: [...], runs: [...], bundled_model: "
                   "card}.")
def models_command(as_json: bool) -> None:
    """List the backends registered in the 'depinduce.models' entry-point group, the training runs under ./runs
    (how each ended, its selected dev score beside right-branching's) and the bundled model's card."""
    from depinduce.api.catalog import list_models, model_catalog  # reads run folders only when the command runs

    if as_json:
        click.echo(json_text(list_models(say), indent=2))
        return
    model_catalog(say).render(stdout_console())
