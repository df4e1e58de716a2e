"""Pieces every subcommand shares: the one-line error and the stdin/stdout convention."""

from __future__ import annotations

import click


class UserError(click.ClickException):
    """A user-fixable problem: printed as exactly one line (``FILE:LINE: what is wrong``), exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:  # noqa: D102 - click's hook
        click.echo(one_line(self.message), err=True)


MESSAGE_CHARS = 2000


def one_line(message: str) -> str:
    """A message as the terminal gets it: control characters escaped (a token's escape sequence, a newline in a
    path), and cut short as a last resort (the values it quotes are cut where they are quoted)."""
    from depinduce.display import printable, shorten

    return printable(shorten(message, MESSAGE_CHARS))


def stdout_console():
    """A rich console for results on stdout; when piped, wide enough that tables never squeeze their cells."""
    from rich.console import Console

    console = Console(soft_wrap=True)
    if not console.is_terminal:
        console = Console(soft_wrap=True, width=160)
    return console
