"""Reading the small files depinduce writes and reads back (vocabularies, recipes) with one-line errors that
name the file: unreadable, not UTF-8, not JSON, or not the expected depinduce format."""

from __future__ import annotations

import json
from os import PathLike
from pathlib import Path
from typing import Any

from depinduce.errors import DepinduceError, InputError


def read_text_file(path: str | PathLike[str], what: str) -> str:
    """The UTF-8 text of ``path``; ``what`` names the kind of file in the error ("recipe", "vocabulary")."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DepinduceError(f"{path}: cannot read {what} ({exc.strerror or exc})") from exc
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


def to_json_text(data: Any) -> str:
    """The JSON form depinduce writes: UTF-8 as is, one-space indent, a final newline."""
    return json.dumps(data, ensure_ascii=False, indent=1) + "\n"
