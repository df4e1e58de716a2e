"""Pieces every subcommand shares: the one-line error and the stdin/stdout convention."""

from __future__ import annotations

import click


class UserError(click.ClickException):
    """A user-fixable problem: printed as exactly one line (``FILE:LINE: what is wrong``), exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:  # noqa: D102 - click's hook
        click.echo(self.message, err=True)
