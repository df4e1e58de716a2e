"""Reading the small files depinduce writes and reads back (vocabularies, recipes) with one-line errors that
name the file: unreadable, not UTF-8, not JSON, or not the expected depinduce format."""

from __future__ import annotations

import json
from os import PathLike
from pathlib import Path
from typing import Any

import yaml

from depinduce.errors import InputError, NotFoundError, ResourceError


def read_text_file(path: str | PathLike[str], what: str) -> str:
    """The UTF-8 text of ``path``; ``what`` names the kind of file in the error ("recipe", "vocabulary")."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        raise NotFoundError(f"{path}: cannot read {what} ({exc.strerror or exc})") from exc
    except OSError as exc:  # permissions, I/O errors: the file is there but cannot be read
        raise ResourceError(f"{path}: cannot read {what} ({exc.strerror or exc})") from exc
    except UnicodeDecodeError:
        raise InputError(path, None, f"{what} is not valid UTF-8") from None


def read_format_json(path: str | PathLike[str], what: str, fmt: str) -> dict[str, Any]:
    """A JSON object whose ``"format"`` is ``fmt`` (depinduce's own files say what they are)."""
    try:
        data = json.loads(read_text_file(path, what))
    except json.JSONDecodeError as exc:
        raise InputError(path, exc.lineno, f"not valid JSON: {exc.msg}") from None
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise InputError(path, None, f"not a depinduce {what} (no \"format\": \"{fmt}\")")
    return data


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error (PyYAML silently keeps the
    last value, so a recipe could say one thing and run another)."""


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


def load_yaml(text: str, path: str | PathLike[str]) -> Any:
    """Parse YAML safely, refusing duplicate keys; any problem is one line ``FILE:LINE: not valid YAML: …``."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or exc.__class__.__name__
        raise InputError(path, line, f"not valid YAML: {problem}") from None


def to_json_text(data: Any) -> str:
    """The JSON form depinduce writes: UTF-8 as is, one-space indent, a final newline."""
    return json.dumps(data, ensure_ascii=False, indent=1) + "\n"
