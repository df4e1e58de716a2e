"""Pieces every subcommand shares: the one-line error and the stdin/stdout convention."""

from __future__ import annotations

import click


class UserError(click.ClickException):
    """A user-fixable problem: printed as exactly one line (``FILE:LINE: what is wrong``), exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:  # noqa: D102 - click's hook
        click.echo(self.message, err=True)


def stdout_console():
    """A rich console for results on stdout; when piped, wide enough that tables never squeeze their cells."""
    from rich.console import Console

    console = Console(soft_wrap=True)
    if not console.is_terminal:
        console = Console(soft_wrap=True, width=160)
    return console
