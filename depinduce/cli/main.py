"""The ``depinduce`` command: a click group whose subcommands only parse options and call the library."""

from __future__ import annotations

import sys

import click

from depinduce import __version__
from depinduce.cli.common import UserError
from depinduce.errors import DepinduceError


class _Group(click.Group):
    """Turns every :class:`DepinduceError` into its one-line message and exit code 2."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except DepinduceError as exc:
            raise UserError(str(exc)) from exc


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="depinduce")
def cli() -> None:
    """Induce syntax from raw text, parse into CoNLL-U / CoNLL-X / brackets, and score parses."""


def _register() -> None:
    from depinduce.cli.eval import eval_command
    from depinduce.cli.models import models_command
    from depinduce.cli.parse import parse_command
    from depinduce.cli.preprocess import preprocess

    for command in (models_command, parse_command, eval_command, preprocess):
        cli.add_command(command)


_register()


def main() -> None:
    """Console-script entry point; a closed stdout (``| head``) ends quietly."""
    try:
        cli.main(prog_name="depinduce")
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(1)


if __name__ == "__main__":
    main()
