"""The ``depinduce`` command: a click group whose subcommands only parse options and call the library."""

from __future__ import annotations

import errno
import importlib
import io
import os
import sys
from typing import NoReturn

import click

from depinduce import __version__
from depinduce.cli.common import UserError, one_line
from depinduce.errors import DepinduceError


# Subcommands are imported only when used, so `depinduce eval` never pays for importing torch.
_COMMANDS: dict[str, str] = {
    "analyze": "depinduce.cli.analyze:analyze",
    "convert": "depinduce.cli.convert:convert_command",
    "models": "depinduce.cli.models:models_command",
    "parse": "depinduce.cli.parse:parse_command",
    "perplexity": "depinduce.cli.perplexity:perplexity_command",
    "eval": "depinduce.cli.eval:eval_command",
    "preprocess": "depinduce.cli.preprocess:preprocess",
    "report": "depinduce.cli.report:report_command",
    "show": "depinduce.cli.show:show_command",
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
        from depinduce.api.words import cli_words  # the API's errors keep the CLI's option names here

        try:
            with cli_words():
                return super().invoke(ctx)
        except DepinduceError as exc:
            raise UserError(str(exc)) from exc


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="depinduce")
def cli() -> None:
    """Induce syntax from raw text, parse into CoNLL-U / CoNLL-X / brackets, and score parses."""


class _ClosedStream(io.RawIOBase):
    """Stands in for a standard stream the shell closed (``>&-``, ``<&-``), where Python leaves None: any use
    is an OSError that becomes one line, instead of an AttributeError traceback."""

    def __init__(self, label: str, verb: str) -> None:
        super().__init__()
        self.label, self.verb = label, verb

    def _closed(self, *args: object) -> NoReturn:
        raise OSError(errno.EBADF, f"cannot {self.verb} (the stream is closed)", self.label)

    readinto = write = _closed

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True


def _guard_standard_streams() -> None:
    if sys.stdin is None:
        sys.stdin = io.TextIOWrapper(io.BufferedReader(_ClosedStream("<stdin>", "read")))
    if sys.stdout is None:
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(_ClosedStream("<stdout>", "write")))


def _fail(message: str) -> NoReturn:
    """One line on stderr, exit code 2; stdout is pointed at /dev/null so its unwritable buffer is not flushed
    again (with a second message) when Python exits."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.BytesIO()))
    click.echo(one_line(message), err=True)
    sys.exit(2)


def _describe(exc: OSError) -> str:
    if exc.filename in ("<stdin>", "<stdout>"):
        return f"{exc.filename}: {exc.strerror}"
    if exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    return f"<stdout>: cannot write ({exc.strerror or exc})"


def _run_cli() -> int:
    """Run the click group; every click error becomes one line, a usage error with where to find help."""
    try:
        result = cli.main(prog_name="depinduce", standalone_mode=False)
    except RecursionError:
        # trees are built and written recursively: one level per nesting level of a bracketed tree
        click.echo(f"a tree is nested more than {RECURSION_LIMIT:,} levels deep, too deep to build or write as "
                   "brackets; use --format conllu for such a sentence", err=True)
        return 2
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "depinduce"
        click.echo(one_line(f"{where}: {exc.format_message()} (see '{where} --help')"), err=True)
        return 2
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.Abort:
        click.echo("aborted", err=True)
        return 1
    return result if isinstance(result, int) else 0


# Bracketed trees are built and written recursively, one Python frame per nesting level: a right-branching tree
# over n words is n levels deep.  Python 3.11's Python-to-Python calls use no C stack, so this is safe.
RECURSION_LIMIT = 10_000


def main() -> None:
    """Console-script entry point.  A closed pipe (``| head``) ends quietly; any other failure to read or write
    a standard stream or file (a full disk, ``/dev/full``, a closed stdout or stdin) is one line, exit code 2."""
    _guard_standard_streams()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
    # torch's import enumerates every installed distribution's entry points for device-backend plugins, and one
    # malformed entry_points.txt anywhere fails that import; depinduce runs on cpu and cuda only, which need no
    # plugin (`TORCH_DEVICE_BACKEND_AUTOLOAD=1` still turns it on)
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    try:
        try:
            code = _run_cli()
        finally:
            sys.stdout.flush()  # results still buffered fail here, inside the handler, not at exit
        sys.exit(code)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(1)
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            sys.stderr.close()
            sys.exit(1)
        _fail(_describe(exc))


if __name__ == "__main__":
    main()
