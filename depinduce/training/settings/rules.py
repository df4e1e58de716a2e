"""The declared types of a recipe section's keys, checked by pydantic, with one-line errors in plain words.

Used for both sections: ``train`` (the fields of the setting groups) and ``model_config`` (the fields of a
backend's hyperparameter dataclass, which stays a plain dataclass and checks its own ranges).  Each value is
checked on its own in the order given, so the first wrong one is named: ``train.epochs must be an integer, not
'many'``, the type in words taken from pydantic's JSON schema of the field.  Strict, as a recipe is written by
hand: a bool is not an int and ``"3"`` is not an integer, but ints widen to floats, and a float field also takes
a string that reads as a number, because PyYAML reads ``3e-4`` (no decimal point) as a string, a recipe trap.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ConfigDict, PydanticUserError, TypeAdapter, ValidationError

from depinduce.data.files import load_yaml
from depinduce.display import quote, shorten
from depinduce.errors import InputError, RecipeError

# a backend's own class as a field type is checked with isinstance
_CLASSES_ALLOWED = ConfigDict(arbitrary_types_allowed=True)
# JSON schema types in the words of the messages (``dict`` as they have always said it)
_WORDS = {"integer": "an integer", "number": "a number", "boolean": "true or false", "string": "a string",
          "object": "dict"}


def _adapter(annotation: Any) -> TypeAdapter[Any]:
    try:
        return _cached_adapter(annotation)
    except TypeError:  # an unhashable annotation
        return _new_adapter(annotation)


@functools.lru_cache(maxsize=256)
def _cached_adapter(annotation: Any) -> TypeAdapter[Any]:
    return _new_adapter(annotation)


def _new_adapter(annotation: Any) -> TypeAdapter[Any]:
    try:
        return TypeAdapter(annotation, config=_CLASSES_ALLOWED)
    except PydanticUserError:  # a pydantic model or dataclass as a field type brings its own config
        return TypeAdapter(annotation)


def _schema(annotation: Any) -> dict[str, Any]:
    """The field's JSON schema; ``{}`` (anything) when it has none (a class of the backend's own)."""
    try:
        return _adapter(annotation).json_schema()
    except Exception:  # pydantic cannot express every type as a schema; only the wording depends on it
        return {}


def _branches(schema: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(schema.get("anyOf") or schema.get("oneOf") or [schema])


def describe(schema: Mapping[str, Any]) -> str:
    """A JSON schema in words, for error messages: ``an integer or null``, ``one of 'adam', 'adamw'``."""
    branches = _branches(schema)
    words = [_describe_one(b) for b in branches if b.get("type") != "null"]
    nullable = len(words) < len(branches)
    return " or ".join(words) + (" or null" if nullable else "") if words else "null"


def _describe_one(schema: Mapping[str, Any]) -> str:
    if "enum" in schema or "const" in schema:
        choices = schema["enum"] if "enum" in schema else [schema["const"]]
        return "one of " + ", ".join(repr(c) for c in choices)
    if "anyOf" in schema or "oneOf" in schema:
        return describe(schema)
    if schema.get("type") == "array":
        items = schema.get("items")
        return f"a list of {describe(items)}" if isinstance(items, Mapping) and items else "a list of values"
    return _WORDS.get(schema.get("type", ""), schema.get("title", "a value"))


def _takes(schema: Mapping[str, Any], kind: str) -> bool:
    """Whether the field takes any value of JSON type ``kind`` (choices do not count: they are not any string)."""
    return any(b.get("type") == kind and "enum" not in b and "const" not in b for b in _branches(schema))


def _numbers_from_text(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` with each string that reads as a number turned into that number where the schema expects a
    number and no string."""
    if isinstance(value, str) and _takes(schema, "number") and not _takes(schema, "string"):
        try:
            return float(value)
        except ValueError:
            return value
    if isinstance(value, list):
        items = [b["items"] for b in _branches(schema) if b.get("type") == "array" and isinstance(b.get("items"), dict)]
        if items:
            return [_numbers_from_text(item, items[0]) for item in value]
    return value


class FieldRules:
    """The keys of one recipe section and their types (``section``: ``train`` or ``model_config``)."""

    def __init__(self, section: str, annotations: Mapping[str, Any]) -> None:
        self.section = section
        self.annotations = dict(annotations)
        self._schemas: dict[str, dict[str, Any]] = {}

    @classmethod
    def of_dataclass(cls, section: str, config_class: type) -> FieldRules:
        """The fields of a hyperparameter dataclass (annotations that cannot be resolved accept anything)."""
        try:
            hints = typing.get_type_hints(config_class)
        except Exception:  # an unresolvable annotation: fall back to accepting anything for that class
            hints = {}
        return cls(section, {f.name: hints.get(f.name, Any) for f in dataclasses.fields(config_class)})

    def __contains__(self, key: object) -> bool:
        return key in self.annotations

    def keys(self) -> list[str]:
        return list(self.annotations)

    def schema(self, key: str) -> dict[str, Any]:
        if key not in self._schemas:
            self._schemas[key] = _schema(self.annotations[key])
        return self._schemas[key]

    def describe(self, key: str) -> str:
        """The type of ``key`` in words (the annotation's name where pydantic has no schema for it)."""
        schema = self.schema(key)
        if not schema:
            annotation = self.annotations[key]
            return getattr(annotation, "__name__", str(annotation))
        return describe(schema)

    def check(self, values: Mapping[str, Any], where: str) -> dict[str, Any]:
        """``values`` converted to their declared types (ints widened to floats), or a one-line
        :class:`RecipeError` naming an unknown key or the first value of a wrong type."""
        unknown = sorted(set(values) - set(self.annotations))
        if unknown:
            raise RecipeError(f"{where}: unknown {self.section} key(s) {', '.join(map(shorten, unknown))}; "
                              f"known: {', '.join(sorted(self.annotations))}")
        out = {}
        for key, value in values.items():
            out[key] = self._validate(key, value, where)
        return out

    def _validate(self, key: str, value: Any, where: str) -> Any:
        adapter = _adapter(self.annotations[key])
        for candidate in self._readings(key, value):
            try:
                return adapter.validate_python(candidate, strict=True)
            except ValidationError:
                continue
        raise RecipeError(f"{where}: {self.section}.{key} must be {self.describe(key)}, not {quote(value)}")

    def _readings(self, key: str, value: Any) -> Iterable[Any]:
        """The value as given, then as YAML may have meant it: strings as numbers where numbers are expected
        (in lists too), and a list as a tuple (YAML has no tuples; strict pydantic takes only tuples there)."""
        yield value
        meant = _numbers_from_text(value, self.schema(key))
        yield meant
        if isinstance(meant, list):
            yield tuple(meant)

    def parse_text(self, key: str, raw: str) -> Any:
        """A ``--set`` value: YAML syntax (``null``, ``true``, ``[1, 2]``), except that a field that takes any
        string keeps the raw text (so ``--set name=123`` stays the string ``"123"``)."""
        lowered = raw.strip().lower()
        if _takes(self.schema(key), "string") and lowered not in ("null", "~", "none"):
            return raw
        if lowered == "none":
            return None
        try:
            return load_yaml(raw, "--set")  # no aliases: a --set value cannot expand into millions of nodes
        except InputError:
            return raw
