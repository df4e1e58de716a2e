"""How user data is shown: the one place that makes a token, a path or a value safe for the tool it lands in.

User data (a token form, a file name, a recipe value) can carry control characters: an escape sequence that sets
the terminal's title or writes its clipboard, a newline that breaks a one-line message or a Markdown row.  Every
terminal output and message passes user text through :func:`printable`; spreadsheets, Markdown and LaTeX get
their own cell escapes here too, and :func:`quote` cuts a long value to a short prefix before it is echoed.
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, and the bidirectional overrides and isolates that reorder what a terminal shows
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\e"}
QUOTE_CHARS = 60


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``text`` with every control character shown as an escape (``\\e``, ``\\n``, ``\\x07``, ``\\u202e``)."""
    return _UNSAFE.sub(_escape, str(text))


def shorten(text: object, limit: int = QUOTE_CHARS) -> str:
    """At most ``limit`` characters of ``text``, with ``…`` when it was cut."""
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "…"


def quote(value: object, limit: int = QUOTE_CHARS) -> str:
    """A value as an error message quotes it: its ``repr`` for non-strings, cut to ``limit`` characters, escaped."""
    if isinstance(value, str):
        return "'" + printable(shorten(value, limit)) + "'"
    try:
        shown = repr(value) if isinstance(value, (int, float, bool, type(None))) else _short_repr(value, limit)
    except (RecursionError, MemoryError):
        shown = f"<a {type(value).__name__}>"
    return printable(shorten(shown, limit))


def _short_repr(value: object, limit: int) -> str:
    """The start of ``repr(value)`` for containers, without building the whole text of a huge one."""
    if isinstance(value, (list, tuple, set, dict)) and len(value) > limit:
        items = list(value.items() if isinstance(value, dict) else value)[:limit]
        return f"<a {type(value).__name__} of {len(value):,} items, starting {shorten(repr(items), limit)}>"
    return repr(value)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A CSV cell a spreadsheet will not run: text starting with ``= + - @``, tab or CR gets a leading ``'``
    (numbers pass unchanged, so a negative score stays a number)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def markdown_cell(text: object) -> str:
    """A Markdown table cell: ``|`` escaped, line breaks and other controls shown as escapes."""
    return printable(str(text).replace("\\", "\\\\").replace("|", "\\|"))


_LATEX = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#",
          "^": r"\textasciicircum{}", "_": r"\_", "%": r"\%", "~": r"\textasciitilde{}", "|": r"\textbar{}",
          "<": r"\textless{}", ">": r"\textgreater{}"}
_LATEX_SPECIAL = re.compile("[" + re.escape("".join(_LATEX)) + "]")


def latex_text(text: object) -> str:
    """Text for a LaTeX table: every character LaTeX treats specially escaped, controls shown as escapes."""
    return _LATEX_SPECIAL.sub(lambda m: _LATEX[m.group()], printable(text))
