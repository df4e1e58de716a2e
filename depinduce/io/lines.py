"""Reading an input file into numbered lines and blank-line-separated blocks, the layer every reader shares.

Every reader reports problems as ``FILE:LINE``, so the text is read whole, decoded here (a bad byte is located
by line), and split on ``\\n`` only: ``str.splitlines`` would also split on characters such as U+2028 or U+0085
that may legitimately occur inside a word, and shift every later line number.  The tolerated sloppiness of
hand-made files (CRLF or bare-CR line ends, trailing spaces or tabs, a missing final newline, runs of blank lines, a UTF-8
byte-order mark) is normalised here once.
"""

from __future__ import annotations

import codecs
import errno
import os
import sys
from dataclasses import dataclass
from os import PathLike
from typing import BinaryIO

from depinduce.errors import InputError, NotFoundError, ResourceError

STDIN_NAME = "<stdin>"
# No line of a text, CoNLL or bracket file comes near this; /dev/zero's endless line does at once.
MAX_LINE_BYTES = 2**20
_CHUNK_BYTES = 2**20


@dataclass(frozen=True)
class Line:
    """One input line: its 1-based number and its text without the line end and trailing spaces/tabs."""

    number: int
    text: str


@dataclass(frozen=True)
class Block:
    """A run of non-blank lines (one sentence in the CoNLL family of formats)."""

    lines: list[Line]

    @property
    def start(self) -> int:
        return self.lines[0].number


def display_name(path: str | PathLike[str]) -> str:
    """How a path appears in error messages; ``-`` is standard input."""
    return STDIN_NAME if str(path) == "-" else str(path)


def _open(path: str | PathLike[str]) -> BinaryIO:
    try:
        if os.path.isdir(path):
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        return open(path, "rb")  # noqa: SIM115 - closed by read_bytes
    except IsADirectoryError as exc:
        raise NotFoundError(f"{path}: is a directory, not a file") from exc
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise NotFoundError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except OSError as exc:  # permissions, I/O errors: the file is there but cannot be read
        raise ResourceError(f"{path}: cannot read ({exc.strerror or exc})") from exc


def read_bytes(path: str | PathLike[str]) -> bytes:
    """The raw content of ``path`` (``-`` = standard input, a pipe or a device streams as well), read a chunk at
    a time so that what is not text fails at once, in one line, instead of filling the memory: a line longer than
    :data:`MAX_LINE_BYTES` (``/dev/zero``) or bytes that are not UTF-8 (``/dev/urandom``)."""
    name = display_name(path)
    stream = sys.stdin.buffer if str(path) == "-" else _open(path)
    chunks: list[bytes] = []
    decoder = codecs.getincrementaldecoder("utf-8")()
    lines = 1
    since_newline = 0
    try:
        while True:
            try:
                chunk = stream.read(_CHUNK_BYTES)
            except OSError as exc:
                if stream is sys.stdin.buffer:
                    raise  # the command's handler names the standard stream
                raise ResourceError(f"{name}: cannot read ({exc.strerror or exc})") from None
            if not chunk:
                break
            chunks.append(chunk)
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError:
                decode_utf8(b"".join(chunks), name)  # raises, locating the first bad byte
            last = chunk.rfind(b"\n")
            since_newline = since_newline + len(chunk) if last < 0 else len(chunk) - last - 1
            lines += chunk.count(b"\n")
            if since_newline > MAX_LINE_BYTES:
                raise InputError(name, lines, f"a line longer than {MAX_LINE_BYTES // 2**20} MiB: not a text file "
                                              "depinduce reads")
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    return b"".join(chunks)


def decode_utf8(data: bytes, name: str) -> str:
    """Decode UTF-8, naming the line and column of the first invalid byte; a leading BOM is dropped."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            name,
            line,
            f"not valid UTF-8: byte 0x{data[exc.start]:02x} at byte {exc.start - line_start + 1} of the line",
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def read_text(path: str | PathLike[str]) -> str:
    """The decoded text of ``path`` (``-`` = standard input), BOM dropped, every line end (CRLF, or a bare CR
    as old Mac files have) turned into ``\n``."""
    text = decode_utf8(read_bytes(path), display_name(path))
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def split_lines(text: str) -> list[Line]:
    """Numbered lines with CR and trailing spaces/tabs removed (a final newline adds no line)."""
    raw = text.split("\n")
    if raw and raw[-1] == "":
        raw.pop()
    return [Line(number, line.rstrip(" \t\r")) for number, line in enumerate(raw, start=1)]


def split_blocks(lines: list[Line]) -> list[Block]:
    """Group lines into blocks separated by one or more blank lines."""
    blocks: list[Block] = []
    current: list[Line] = []
    for line in lines:
        if line.text.strip():
            current.append(line)
        elif current:
            blocks.append(Block(current))
            current = []
    if current:
        blocks.append(Block(current))
    return blocks


def no_sentences(name: str) -> InputError:
    """The error for an input without a single sentence (empty, blank or comments only)."""
    return InputError(name, None, "no sentences (the input is empty or blank)")
