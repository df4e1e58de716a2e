"""Running the command line in-process, as several test files do."""

from __future__ import annotations

from click.testing import CliRunner, Result

from depinduce.cli.main import cli


def run(args: list[str], stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, args, input=stdin, catch_exceptions=False)


def ok(args: list[str], stdin: str | None = None) -> str:
    """stdout of a command that must succeed."""
    result = run(args, stdin)
    assert result.exit_code == 0, result.stderr
    return result.stdout
