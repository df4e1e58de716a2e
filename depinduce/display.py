"""How user data is shown: the one place that makes a token, a path or a value safe for the tool it lands in.

User data (a token form, a file name, a recipe value) can carry control characters: an escape sequence that sets
the terminal's title or writes its clipboard, a newline that breaks a one-line message or a Markdown row, a
character that is invisible or reorders the line.  One policy covers every sink: the same characters
(:data:`_UNSAFE`) are shown as escapes on a terminal and in messages (:func:`printable`, :func:`quote`), in CSV
(:func:`csv_cell`, which also defuses formulas), Markdown (:func:`markdown_cell`, :func:`markdown_text`, which
also keep HTML out), LaTeX (:func:`latex_text`) and HTML or SVG (:func:`html_text`), and are written as ``\\u``
escapes in JSON (:func:`json_text`, lossless: JSON reads them back as they were).  A name echoed in a message
(:func:`shown_name`, :func:`quote`) escapes the zero-width joiners too, so no two different names look the same.
"""

from __future__ import annotations

import html
import json
import re
import shlex
import sys
from typing import Any

# C0 and C1 controls, DEL; the bidirectional marks, overrides and isolates that reorder what a terminal shows;
# the line and paragraph separators (``str.splitlines`` breaks a JSONL record at them, with U+0085); and the
# invisible formatting characters (soft hyphen, zero-width space, word joiners, BOM, tag characters) — all but
# the zero-width (non-)joiners, which scripts such as Persian and Devanagari write inside words
_INVISIBLE = "\u00ad\u034f\u180e\u200b\u2060-\u2064\u206a-\u206f\ufeff\ufff9-\ufffb\U000e0000-\U000e007f"
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
                     + _INVISIBLE + "]")
_UNSAFE_IN_NAMES = re.compile(_UNSAFE.pattern[:-1] + "\u200c\u200d]")
_JSON_UNSAFE = re.compile(_UNSAFE.pattern.replace("\x00-\x1f", "", 1))  # json.dumps escapes C0 itself
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\e"}
QUOTE_CHARS = 60


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: object) -> str:
    """``text`` with every control or invisible character shown as an escape (``\\e``, ``\\n``, ``\\x07``,
    ``\\u202e``, ``\\u200b``): what a terminal, a log or a message gets."""
    return _UNSAFE.sub(_escape, str(text))


def printable_lines(text: object) -> str:
    """:func:`printable` line by line: the line breaks of a multi-line note kept, everything else escaped."""
    return "\n".join(printable(line) for line in str(text).split("\n"))


def say(text: object) -> None:
    """A note or warning on stderr (a run folder named in it, a test file's label), escaped as
    :func:`printable_lines` escapes: the one way depinduce's lines reach the terminal beside its errors."""
    print(printable_lines(text), file=sys.stderr, flush=True)


def shown_name(text: object, limit: int = 60) -> str:
    """A name as a message echoes it (a recipe key, a label): cut to ``limit`` characters and :func:`printable`,
    the zero-width joiners escaped too, so ``lr`` and ``l\\u200dr`` never look alike."""
    return _UNSAFE_IN_NAMES.sub(_escape, shorten(text, limit))


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON writes a character beyond the BMP as its UTF-16 surrogate pair
    return f"\\u{0xd800 + (code >> 10):04x}\\u{0xdc00 + (code & 0x3ff):04x}"


def json_text(data: Any, indent: int | None = None, **options: Any) -> str:
    """JSON as depinduce prints and writes it: UTF-8 as is, but every character of :data:`_UNSAFE` as a ``\\u``
    escape, so a terminal never acts on one and ``splitlines()`` never breaks a JSON Lines record (U+2028,
    U+0085); JSON reads the escapes back as the characters they were."""
    return _JSON_UNSAFE.sub(_json_escape, json.dumps(data, ensure_ascii=False, indent=indent, **options))


def shell_command(*words: object) -> str:
    """A command line to paste into a shell: each word quoted as the shell needs it (a run folder named
    ``x$(touch y)`` stays a name, never a command), then escaped for the terminal (:func:`printable`)."""
    return printable(" ".join(shlex.quote(str(word)) for word in words))


def shorten(text: object, limit: int = QUOTE_CHARS) -> str:
    """At most ``limit`` characters of ``text``, with ``…`` when it was cut."""
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "…"


def quote(value: object, limit: int = QUOTE_CHARS) -> str:
    """A value as an error message quotes it: its ``repr`` for non-strings, cut to ``limit`` characters, escaped
    as :func:`shown_name` escapes."""
    if isinstance(value, str):
        return "'" + shown_name(value, limit) + "'"
    try:
        shown = repr(value) if isinstance(value, (int, float, bool, type(None))) else _short_repr(value, limit)
    except (RecursionError, MemoryError):
        shown = f"<a {type(value).__name__}>"
    return shown_name(shown, limit)


def _short_repr(value: object, limit: int) -> str:
    """The start of ``repr(value)`` for containers, without building the whole text of a huge one."""
    if isinstance(value, (list, tuple, set, dict)) and len(value) > limit:
        items = list(value.items() if isinstance(value, dict) else value)[:limit]
        return f"<a {type(value).__name__} of {len(value):,} items, starting {shorten(repr(items), limit)}>"
    return repr(value)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A CSV cell a spreadsheet will not run and a terminal will not act on: text starting with ``= + - @``, tab
    or CR gets a leading ``'``, then :func:`printable` (numbers pass unchanged, so a negative score stays a
    number)."""
    if not isinstance(value, str):
        return value
    return printable("'" + value if value.startswith(_FORMULA_START) else value)


def markdown_text(text: object) -> str:
    """Markdown prose (a note under a table): ``< > &`` as entities, so a name such as ``<img onerror=…>`` is
    shown, never rendered as HTML; controls shown as escapes."""
    return printable(html.escape(str(text), quote=False))


def markdown_cell(text: object) -> str:
    """A Markdown table cell: :func:`markdown_text` with ``\\`` and ``|`` escaped, line breaks as escapes."""
    return markdown_text(str(text).replace("\\", "\\\\").replace("|", "\\|"))


def html_text(text: object) -> str:
    """Text or attribute content for HTML and SVG: ``< > & " '`` as entities and the characters of
    :data:`_UNSAFE` (which XML forbids or a terminal showing the file would act on) shown as escapes."""
    return html.escape(printable(text), quote=True)


_LATEX = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#",
          "^": r"\textasciicircum{}", "_": r"\_", "%": r"\%", "~": r"\textasciitilde{}", "|": r"\textbar{}",
          "<": r"\textless{}", ">": r"\textgreater{}"}
_LATEX_SPECIAL = re.compile("[" + re.escape("".join(_LATEX)) + "]")


def latex_text(text: object) -> str:
    """Text for a LaTeX table: every character LaTeX treats specially escaped, controls shown as escapes."""
    return _LATEX_SPECIAL.sub(lambda m: _LATEX[m.group()], printable(text))
