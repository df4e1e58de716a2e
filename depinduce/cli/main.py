"""The ``depinduce`` command: a click group whose subcommands only parse options and call the library."""

from __future__ import annotations

import importlib
import sys

import click

from depinduce import __version__
from depinduce.cli.common import UserError
from depinduce.errors import DepinduceError


# Subcommands are imported only when used, so `depinduce eval` never pays for importing torch.
_COMMANDS: dict[str, str] = {
    "analyze": "depinduce.cli.analyze:analyze",
    "models": "depinduce.cli.models:models_command",
    "parse": "depinduce.cli.parse:parse_command",
    "perplexity": "depinduce.cli.perplexity:perplexity_command",
    "eval": "depinduce.cli.eval:eval_command",
    "preprocess": "depinduce.cli.preprocess:preprocess",
    "train": "depinduce.cli.train:train_command",
}


class _Group(click.Group):
    """Loads subcommands lazily and turns every :class:`DepinduceError` into one line and exit code 2."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        return getattr(importlib.import_module(module_name), attribute)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except DepinduceError as exc:
            raise UserError(str(exc)) from exc


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="depinduce")
def cli() -> None:
    """Induce syntax from raw text, parse into CoNLL-U / CoNLL-X / brackets, and score parses."""


def main() -> None:
    """Console-script entry point; a closed stdout (``| head``) ends quietly."""
    try:
        cli.main(prog_name="depinduce")
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(1)


if __name__ == "__main__":
    main()
