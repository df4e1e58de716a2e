"""Reading the small files depinduce writes and reads back (vocabularies, recipes, run configs, manifests) with
one-line errors that name the file: unreadable, not UTF-8, not JSON, or not the expected depinduce format.

Nothing here is trusted to be small or well-formed: a settings file must be a regular file (a FIFO would hang
the read, ``/dev/zero`` would fill the memory) no larger than a limit, JSON and YAML nested deeper than any
setting needs are refused naming the file, and YAML anchors and aliases are refused (nine levels of nine
aliases expand to 387 million nodes; no setting needs one).
"""

from __future__ import annotations

import json
import os
import re
import stat
from os import PathLike
from typing import Any

import yaml

from depinduce.display import json_text
from depinduce.errors import DepinduceError, InputError, NotFoundError, ResourceError


SETTINGS_MAX_BYTES = 4 * 2**20  # recipes, configs, manifests, score caches: a few kB in practice
VOCAB_MAX_BYTES = 64 * 2**20  # a vocabulary of millions of words
METRICS_MAX_BYTES = 64 * 2**20  # one short line per evaluation
MAX_DEPTH = 100  # no setting nests more than a few levels


def read_text_file(path: str | PathLike[str], what: str, limit: int = SETTINGS_MAX_BYTES) -> str:
    """The UTF-8 text of ``path``, a regular file of at most ``limit`` bytes; ``what`` names the kind of file in
    the error ("recipe", "vocabulary").  The file is checked before it is opened, so a FIFO never hangs."""
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(21, "is a folder, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise InputError(path, None, f"{what} is not a regular file (a FIFO or device)")
        if info.st_size > limit:
            raise InputError(path, None, f"{what} is {info.st_size:,} bytes, more than the {limit // 2**20} MiB a "
                                         f"{what} may have")
        with open(path, encoding="utf-8") as stream:
            text = stream.read(limit + 1)
        if len(text.encode("utf-8")) > limit:
            raise InputError(path, None, f"{what} grew past {limit // 2**20} MiB while it was read")
        return text
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        raise NotFoundError(f"{path}: cannot read {what} ({exc.strerror or exc})") from exc
    except OSError as exc:  # permissions, I/O errors: the file is there but cannot be read
        raise ResourceError(f"{path}: cannot read {what} ({exc.strerror or exc})") from exc
    except UnicodeDecodeError:
        raise InputError(path, None, f"{what} is not valid UTF-8") from None


def read_format_json(path: str | PathLike[str], what: str, fmt: str) -> dict[str, Any]:
    """A JSON object whose ``"format"`` is ``fmt`` (depinduce's own files say what they are)."""
    data = load_json(read_text_file(path, what, VOCAB_MAX_BYTES), path)
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise InputError(path, None, f"not a depinduce {what} (no \"format\": \"{fmt}\")")
    return data


def load_json(text: str, path: str | PathLike[str]) -> Any:
    """Parse JSON; any problem, a nesting deeper than Python's stack included, is one line naming ``path``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, exc.lineno, f"not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(path, None, "not a depinduce file: JSON nested too deeply") from None


def read_json_file(path: str | PathLike[str], what: str, limit: int = SETTINGS_MAX_BYTES) -> Any:
    """A bounded settings file (:func:`read_text_file`) parsed as JSON (:func:`load_json`)."""
    return load_json(read_text_file(path, what, limit), path)


def try_read_json(path: str | PathLike[str], limit: int = SETTINGS_MAX_BYTES) -> Any | None:
    """The JSON in ``path``, or None when it is missing or is no bounded, well-formed JSON file: for the files
    depinduce only consults (a run's manifest for a note), where a bad one means "nothing to say"."""
    try:
        return read_json_file(path, "file", limit)
    except DepinduceError:
        return None


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error (PyYAML silently keeps the
    last value, so a recipe could say one thing and run another), and that anchors, aliases and nesting deeper
    than :data:`MAX_DEPTH` are refused before anything is built."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.composer.ComposerError(None, None, "anchors and aliases (&name, *name) are not allowed in "
                                              "depinduce settings; write the value out", event.start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep",
                                                  event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} appears twice (first on line {seen[key]})", key_node.start_mark)
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)

# YAML 1.2's core schema, not PyYAML's YAML 1.1: ``010`` is ten (1.1: eight), ``on``/``off``/``yes``/``no`` are
# words (1.1: booleans), ``1e-3`` is a number (1.1: a string), and ``1:20``, ``1_000`` and ``2024-01-02`` stay
# the text they are (1.1: 80, 1000 and a date) — a recipe means what it says
_CORE = [
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    ("tag:yaml.org,2002:float", r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                                r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", "-+0123456789."),
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
]
_UniqueKeyLoader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in _CORE:
    _UniqueKeyLoader.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))


def _core_int(loader: _UniqueKeyLoader, node: yaml.ScalarNode) -> int:
    text = loader.construct_scalar(node)
    if text[:2] in ("0o", "0x"):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)  # leading zeros are decimal


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _core_int)


class _SettingsDumper(yaml.SafeDumper):
    """PyYAML's writer, quoting too what YAML 1.2 reads as no string (``1e-3``), so a file depinduce writes reads
    back the same under either version."""


for _tag, _pattern, _first in _CORE:
    _SettingsDumper.add_implicit_resolver(_tag, re.compile(_pattern), list(_first))


def dump_yaml(data: Any) -> str:
    """``data`` as the YAML depinduce writes (``config.yaml``): keys in order, Unicode as is."""
    return yaml.dump(data, Dumper=_SettingsDumper, sort_keys=False, allow_unicode=True)


def load_yaml(text: str, path: str | PathLike[str]) -> Any:
    """Parse YAML safely under YAML 1.2's core schema (``_CORE``), refusing duplicate keys; any problem is one line
    ``FILE:LINE: not valid YAML: …``."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:  # flow collections nest in the scanner too, before any node is composed
        raise InputError(path, None, "not valid YAML: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or exc.__class__.__name__
        raise InputError(path, line, f"not valid YAML: {problem}") from None


def to_json_text(data: Any) -> str:
    """The JSON form depinduce writes: UTF-8 as is, one-space indent, a final newline."""
    return json_text(data, indent=1) + "\n"
