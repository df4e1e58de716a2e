"""A small declarative type check for the JSON and YAML files depinduce writes and reads back.

A file read back may have been edited, cut short or written by another version; a value of the wrong type must
be one line naming the file and the field (``manifest.json: field 'runs[0].outcome.step' must be an integer, not
"abc"``), never a ``TypeError`` deep inside ``parse`` or a number printed as if it were measured.

A spec is a Python type (``str``, ``int``, ``bool``), :data:`NUMBER`, a ``dict`` of field specs (a mapping whose
listed keys are checked; keys not listed are allowed unless ``rest`` says otherwise), a one-item ``list`` (a list
of that), or one of the wrappers below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

from depinduce.display import quote
from depinduce.errors import InputError


@dataclass(frozen=True)
class Opt:
    """The field may be absent or null."""

    spec: Any


@dataclass(frozen=True)
class MapOf:
    """A mapping from strings to values of ``spec``."""

    spec: Any


@dataclass(frozen=True)
class OneOf:
    """One of the given values."""

    values: tuple[Any, ...]


@dataclass(frozen=True)
class Record:
    """A mapping with the listed fields, and ``rest`` for every other key (None: any value)."""

    fields: dict[str, Any]
    rest: Any = None


@dataclass(frozen=True)
class Range:
    """A finite number from ``low`` to ``high`` (a percentage: 0 to 100)."""

    low: float
    high: float = field(default=math.inf)


NUMBER = Range(-math.inf, math.inf)
ANY = object()


class Mismatch(Exception):
    """A value that does not fit its spec: where (``runs[0].step``) and what was expected."""

    def __init__(self, where: str, expected: str, value: Any) -> None:
        super().__init__(where)
        self.where, self.expected, self.value = where, expected, value


_NAMES = {str: "a string", int: "an integer", bool: "true or false", float: "a number", dict: "a mapping",
          list: "a list"}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check(value: Any, spec: Any, where: str) -> None:
    if spec is ANY:
        return
    if isinstance(spec, Opt):
        if value is not None:
            _check(value, spec.spec, where)
        return
    if isinstance(spec, Range):
        if not _is_number(value) or not math.isfinite(value) or not spec.low <= value <= spec.high:
            bounds = "a finite number" if spec is NUMBER else f"a number from {spec.low:g} to {spec.high:g}"
            raise Mismatch(where, bounds, value)
        return
    if isinstance(spec, OneOf):
        if value not in spec.values:
            raise Mismatch(where, " or ".join(quote(str(v)) for v in spec.values), value)
        return
    if isinstance(spec, type):
        ok = isinstance(value, spec) and not (spec is int and isinstance(value, bool))
        if not ok:
            raise Mismatch(where, _NAMES.get(spec, spec.__name__), value)
        return
    if isinstance(spec, list):
        if not isinstance(value, list):
            raise Mismatch(where, "a list", value)
        for index, item in enumerate(value):
            _check(item, spec[0], f"{where}[{index}]")
        return
    if isinstance(spec, MapOf):
        if not isinstance(value, dict):
            raise Mismatch(where, "a mapping", value)
        for key, item in value.items():
            _check(item, spec.spec, f"{where}.{key}" if where else str(key))
        return
    record = spec if isinstance(spec, Record) else Record(spec)
    if not isinstance(value, dict):
        raise Mismatch(where, "a mapping", value)
    for key, inner in record.fields.items():
        inner_where = f"{where}.{key}" if where else key
        if key not in value:
            if not isinstance(inner, Opt):
                raise Mismatch(inner_where, "present", _MISSING)
            continue
        _check(value[key], inner, inner_where)
    if record.rest is not None:
        for key, item in value.items():
            if key not in record.fields:
                _check(item, record.rest, f"{where}.{key}" if where else str(key))


_MISSING = object()


def _shown(value: Any) -> str:
    if value is _MISSING:
        return "missing"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, (dict, list)):
        return f"a {'mapping' if isinstance(value, dict) else 'list'}"
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def problem(data: Any, spec: Any) -> str | None:
    """What is wrong with ``data`` (``field 'x' must be …, not …``), or None when it fits ``spec``."""
    try:
        _check(data, spec, "")
    except Mismatch as exc:
        if exc.value is _MISSING:
            return f"field '{exc.where}' is missing"
        if not exc.where:
            return f"must be {exc.expected}, not {_shown(exc.value)}"
        return f"field '{exc.where}' must be {exc.expected}, not {_shown(exc.value)}"
    return None


def validate(data: Any, spec: Any, path: str | PathLike[str], line: int | None = None) -> Any:
    """``data`` when it fits ``spec``, else an :class:`InputError` naming ``path`` (and ``line``) and the field."""
    wrong = problem(data, spec)
    if wrong is not None:
        raise InputError(path, line, wrong)
    return data
