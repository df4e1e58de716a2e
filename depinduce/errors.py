"""Errors a user can fix.

The CLI turns every :class:`DepinduceError` into one line on stderr and exit code 2, so library code raises
these (never prints) and never lets a malformed input become a traceback or a silently wrong result.
"""

from __future__ import annotations

from os import PathLike


class DepinduceError(Exception):
    """A problem with the user's input, options or environment, reported as one line."""


class InputError(DepinduceError):
    """Malformed input, located as ``FILE:LINE: what is wrong`` (line omitted when unknown)."""

    def __init__(self, path: str | PathLike[str], line: int | None, problem: str) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        super().__init__(str(self))

    def __reduce__(self):
        # picklable, so worker processes (parallel preprocessing) can send it back unchanged
        return (InputError, (self.path, self.line, self.problem))

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.problem}"
