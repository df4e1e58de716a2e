"""The API's errors in Python's words: the library's messages name command-line options (``--set``,
``--decoder``); called from Python, :func:`python_words` renames them to the API's parameters (and checks the
arguments first, :func:`depinduce.api.checks.check_arguments`).  The command line
marks its calls with :func:`cli_words`, so its own messages stay as they are."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from depinduce.api.checks import check_arguments
from depinduce.errors import DepinduceError, InputError

F = TypeVar("F", bound=Callable[..., Any])

_IN_CLI: ContextVar[bool] = ContextVar("depinduce_cli_words", default=False)

# whole phrases first, where renaming option by option would not read as a sentence
_PHRASES: tuple[tuple[str, str | Callable[[re.Match[str]], str]], ...] = (
    (r"--label names the --test files; give --test FILE for each --label",
     "labels name the test files: give tests=[FILE, ...] with one label per file"),
    (r"--label: (\d+) given for (\d+) --test file\(s\); give one per --test",
     r"labels: \1 given for \2 test files; give one label per test file"),
    (r"--test (\S+): no such file", r"tests: \1: no such file"),
    (r"--test FILE", "tests=[FILE]"),
    (r"--treebank PATH", "treebank=[PATH]"),
    (r"--seeds \((\d+(?:,\d+)+) or a count\)", lambda m: f"seeds={_listed(m[1])} or seeds=N"),
    (r"--set ([^\s:()]+=[^\s:()]*)", r"settings=['\1']"),
    (r"--set ([\w.]+):", r"settings key '\1':"),
    (r"--device (\S+?):", r"device='\1':"),
    (r"choose one with --decoder", "choose one with decoder=NAME"),
    (r"--full-ud\b", "fmt='conllu-ud'"),
    (r"--(?:input-)?format ([a-z][\w-]*)", lambda m: f"{_parameter(m[0].split()[0][2:])}='{m[1]}'"),
)
# command-line option -> the API's parameter (an option not named here keeps its name, dashes as underscores)
_PARAMETERS = {"set": "settings", "format": "fmt", "test": "tests", "label": "labels", "x": "x_axis"}
# on/off options: True in Python
_FLAGS = frozenset({"force", "resume", "tokenized", "probs", "quiet", "pretokenized", "keep-punct", "cased"})
# an option's value as messages show it: a placeholder (N, FILE), integers (0,1,2), a quoted or a path-like value
_VALUE = r"(?P<value>[A-Z][A-Z_]*\b|\d+(?:,\d+)+\b|-?\d+\b|'[^']*'|[^\s:;,()'`]*/[^\s:;,()'`]*)"
_OPTION = re.compile(r"(?<![\w-])--(?P<name>[a-z][a-z-]*)(?: " + _VALUE + ")?")


def _listed(integers: str) -> str:
    return "[" + ", ".join(integers.split(",")) + "]"


def _parameter(option: str) -> str:
    return _PARAMETERS.get(option, option.replace("-", "_"))


def _option(match: re.Match[str]) -> str:
    """``--seeds 0,1`` -> ``seeds=[0, 1]``, ``--out RUN_DIR`` -> ``out=RUN_DIR``, ``--force`` -> ``force=True``,
    and an option named without a value -> its parameter's bare name (``--jobs runs …`` -> ``jobs runs …``)."""
    name, value = match["name"], match["value"]
    if name in _FLAGS:
        return f"{_parameter(name)}=True" + ("" if value is None else f" {value}")
    if value is None:
        return _parameter(name)
    if re.fullmatch(r"\d+(?:,\d+)+", value):
        value = _listed(value)
    return f"{_parameter(name)}={value}"


def python_message(message: str) -> str:
    """``message`` with every command-line option renamed to the API parameter that sets it; a command quoted in
    backticks (`` `depinduce train --resume` ``) is left as the shell command it is."""
    parts = message.split("`")
    for k in range(0, len(parts), 2):  # outside backticks
        for pattern, replacement in _PHRASES:
            parts[k] = re.sub(pattern, replacement, parts[k])
        parts[k] = _OPTION.sub(_option, parts[k])
    return "`".join(parts)


def _renamed(exc: DepinduceError) -> DepinduceError:
    if isinstance(exc, InputError):
        return InputError(exc.path, exc.line, python_message(exc.problem))
    try:
        return type(exc)(python_message(str(exc)))
    except TypeError:  # a subclass with another signature keeps its message
        return exc


def _iterate(items: Iterator[Any]) -> Iterator[Any]:
    try:
        yield from items
    except DepinduceError as exc:
        if _IN_CLI.get():
            raise
        raise _renamed(exc).with_traceback(exc.__traceback__) from None


def python_words(function: F) -> F:
    """The API's boundary: check every argument against ``function``'s annotations (so ``keep_punct="no"`` is an
    error, not True), and re-raise the library's errors from ``function`` (and from the iterator it returns) in
    Python's words, unless the command line is calling."""
    if getattr(function, "__python_words__", False):
        return function

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            check_arguments(function, args, kwargs)
            result = function(*args, **kwargs)
        except DepinduceError as exc:
            if _IN_CLI.get():
                raise
            raise _renamed(exc).with_traceback(exc.__traceback__) from None
        return _iterate(result) if isinstance(result, Iterator) else result

    wrapper.__python_words__ = True  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


@contextmanager
def cli_words() -> Iterator[None]:
    """The command line's calls: errors keep naming its options."""
    token = _IN_CLI.set(True)
    try:
        yield
    finally:
        _IN_CLI.reset(token)
