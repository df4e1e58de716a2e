"""Errors a user can fix.

The CLI turns every :class:`DepinduceError` into one line on stderr and exit code 2, so library code raises
these (never prints) and never lets a malformed input become a traceback or a silently wrong result.
"""

from __future__ import annotations

from os import PathLike


class DepinduceError(Exception):
    """A problem with the user's input, options or environment, reported as one line.

    Every error is raised as one of the subclasses below, so a script can catch one kind (a missing file, a run
    directory that would be overwritten) and let the others through; the message is the CLI's line either way.
    """


class UsageError(DepinduceError):
    """Options or arguments that are invalid or do not fit together (a decoder another backend owns,
    ``--tokenized`` with CoNLL-U input, a batch size of 0)."""


class RecipeError(UsageError):
    """A training recipe or override that cannot be used: unknown key, wrong type, out-of-range value."""


class NotFoundError(DepinduceError):
    """A file, folder or corpus the command needs is not there (an input file, a data folder, an NLTK corpus)."""


class ModelError(DepinduceError):
    """A model that cannot be loaded or cannot do what was asked: unknown name, damaged or foreign checkpoint,
    a capability the backend lacks (brackets from a dependency-only model, refinement by a non-refiner)."""


class RunDirectoryError(DepinduceError):
    """A run or output directory that would be overwritten without ``--force``, is locked by another process,
    or does not match the run being resumed."""


class ResourceError(DepinduceError):
    """The environment cannot serve the request: a device that is absent, an optional extra that is not
    installed, not enough memory, a file that cannot be written."""


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
