"""CoNLL-U, read and written through the ``conllu`` library, with errors located to the line.

Reading: each blank-line-separated block is first checked line by line (10 tab-separated columns, no empty
column, a valid ID, word IDs 1..n in order, integer HEADs in 0..n), because the library's own errors carry no
line number and it silently accepts short lines; the block is then parsed by ``conllu``.  Multiword-token
lines and empty nodes stay in ``Sentence.source`` (the ``TokenList``) but not in ``words``, which holds the
syntactic words only.  A column that is ``_`` for every word (e.g. HEAD of a file still to be parsed) becomes
``None`` in the Sentence.

Writing: a Sentence read from CoNLL-U (``source`` is a ``TokenList``) is written back with every column and
comment the user gave; only HEAD and DEPREL are filled from the Sentence (``root``/``dep`` when it has heads
but no labels) and a missing UPOS becomes ``X``.  DEPS (the enhanced graph) is passed through untouched.
Either way each sentence gets a ``# sent_id`` unique within the output (generated as the sentence's ordinal
when absent; a repeated id gets a ``-2``, ``-3`` … suffix) and a ``# text``: when the sentence has none it is
rebuilt from the surface tokens, honouring ``SpaceAfter=No``; a Sentence without ``source`` but with ``text``
gets ``SpaceAfter=No`` wherever its words are adjacent in that text.  The result passes ``udvalidate --level 2``
whenever the heads form a tree and the labels are UD relations.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TextIO

from conllu.exceptions import ParseException
from conllu.models import Metadata, Token, TokenList
from conllu.parser import DEFAULT_FIELDS, DEFAULT_FIELD_PARSERS, parse_nullable_value, parse_token_and_metadata

from depinduce.structures.sentence import Sentence
from depinduce.errors import InputError, UsageError
from depinduce.io.heads import check_heads, collect_heads, parse_head
from depinduce.io.lines import Block, display_name, no_sentences, read_text, split_blocks, split_lines

COLUMNS = ("ID", "FORM", "LEMMA", "UPOS", "XPOS", "FEATS", "HEAD", "DEPREL", "DEPS", "MISC")
UPOS_TAGS = frozenset(
    "ADJ ADP ADV AUX CCONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT SCONJ SYM VERB X".split()
)

_WORD_ID = re.compile(r"[1-9][0-9]*")
_RANGE_ID = re.compile(r"([1-9][0-9]*)-([1-9][0-9]*)")
_EMPTY_ID = re.compile(r"(0|[1-9][0-9]*)\.([1-9][0-9]*)")


def _parse_key_values(line: list[str], i: int) -> dict[str, str | None] | None:
    """FEATS/MISC as the library reads them, except that a value may itself contain ``=``."""
    value = line[i]
    if parse_nullable_value(value) is None:
        return None
    out: dict[str, str | None] = {}
    for part in value.split("|"):
        key, has_value, val = part.partition("=")
        if parse_nullable_value(key) is None:
            continue
        out[key] = parse_nullable_value(val) if has_value else ""
    return out


_FIELD_PARSERS = {**DEFAULT_FIELD_PARSERS, "feats": _parse_key_values, "misc": _parse_key_values}


def _keep_comment(key: str, value: str | None) -> list[tuple[str, str | None]]:
    """Keep free-form comments (no ``=``) too, so writing the TokenList back loses no comment line."""
    return [(key, value)] if key else []


_METADATA_PARSERS = {"__fallback__": _keep_comment}


# --------------------------------------------------------------------------------------------------- reading


def read_conllu(path: str, *, check_trees: bool = True) -> list[Sentence]:
    """Read a CoNLL-U file (``-`` = stdin) into Sentences; see the module docstring for what is checked."""
    name = display_name(path)
    return parse_conllu_text(read_text(path), name, check_trees=check_trees)


def parse_conllu_text(text: str, name: str, *, check_trees: bool = True) -> list[Sentence]:
    """Parse CoNLL-U text; ``name`` is the file name used in error messages."""
    sentences = [_read_block(block, name, check_trees) for block in split_blocks(split_lines(text))]
    if not sentences:
        raise no_sentences(name)
    return sentences


def _check_token_line(cols: list[str], number: int, name: str) -> None:
    if len(cols) != 10:
        raise InputError(name, number, f"expected 10 tab-separated columns, found {len(cols)}")
    for col, value in zip(COLUMNS, cols):
        if not value:
            raise InputError(name, number, f"column {col} is empty (use '_' for no value)")
        if "  " in value:
            raise InputError(name, number, f"column {col} contains two consecutive spaces")


def _read_block(block: Block, name: str, check_trees: bool) -> Sentence:
    """Pre-check one sentence block line by line, then parse it with the conllu library."""
    word_lines: list[int] = []
    head_values: list[int | None] = []
    ranges: list[tuple[int, int]] = []  # (line, last word) of each multiword token
    seen_token = False
    for line in block.lines:
        if line.text.startswith("#"):
            continue
        seen_token = True
        cols = line.text.split("\t")
        _check_token_line(cols, line.number, name)
        token_id = cols[0]
        expected = len(word_lines) + 1
        if _WORD_ID.fullmatch(token_id):
            if int(token_id) != expected:
                raise InputError(name, line.number, f"word ID {token_id} out of sequence; expected {expected}")
            word_lines.append(line.number)
            head_values.append(parse_head(cols[6], name, line.number))
        elif match := _RANGE_ID.fullmatch(token_id):
            first, last = int(match[1]), int(match[2])
            if first != expected:
                raise InputError(name, line.number, f"multiword token {token_id} must start at word {expected}")
            if last <= first:
                raise InputError(name, line.number, f"multiword token range {token_id} is not increasing")
            ranges.append((line.number, last))
        elif match := _EMPTY_ID.fullmatch(token_id):
            if int(match[1]) != expected - 1:
                raise InputError(name, line.number, f"empty node {token_id} must follow word {expected - 1}")
        else:
            raise InputError(name, line.number, f"invalid ID '{token_id}'")
    if not seen_token:
        raise InputError(name, block.start, "comment lines not followed by any token line")
    if not word_lines:
        raise InputError(name, block.start, "sentence has no syntactic words (only multiword/empty-node lines)")
    for number, last in ranges:
        if last > len(word_lines):
            raise InputError(name, number, f"multiword token ends at word {last}; the sentence has {len(word_lines)}")
    heads = collect_heads(head_values, word_lines, name)
    if heads is not None:
        check_heads(heads, word_lines, name, check_trees=check_trees)

    try:
        tokens = parse_token_and_metadata(
            "\n".join(line.text for line in block.lines),
            fields=DEFAULT_FIELDS,
            field_parsers=_FIELD_PARSERS,
            metadata_parsers=_METADATA_PARSERS,
        )
    except ParseException as exc:
        raise InputError(name, block.start, f"malformed CoNLL-U sentence: {exc}") from None
    sentence = _sentence_from_tokens(tokens, heads, block.start)
    sentence.token_lines = word_lines
    return sentence


def _column_or_none(values: list[Any]) -> list[str] | None:
    """A column as strings with ``_`` for missing values, or None when no word has a value."""
    if all(v is None for v in values):
        return None
    return ["_" if v is None else str(v) for v in values]


def _sentence_from_tokens(tokens: TokenList, heads: list[int] | None, line: int) -> Sentence:
    words = [t for t in tokens if isinstance(t["id"], int)]
    metadata = {str(k): str(v) for k, v in tokens.metadata.items() if v is not None}
    return Sentence(
        words=[t["form"] for t in words],
        xpos=_column_or_none([t["xpos"] for t in words]),
        upos=_column_or_none([parse_nullable_value(t["upos"]) for t in words]),
        heads=heads,
        deprels=_column_or_none([parse_nullable_value(t["deprel"]) for t in words]),
        sent_id=metadata.get("sent_id"),
        text=metadata.get("text"),
        line=line,
        metadata=metadata,
        source=tokens,
    )


# --------------------------------------------------------------------------------------------------- writing


def default_deprels(heads: Sequence[int]) -> list[str]:
    """Labels for an unlabelled parse: ``root`` for the word attached to ROOT, ``dep`` for every other."""
    return ["root" if h == 0 else "dep" for h in heads]


def _surface_tokens(tokens: TokenList) -> Iterator[Token]:
    """The tokens that make up the text: multiword tokens instead of their words; no empty nodes."""
    skip_until = 0
    for token in tokens:
        token_id = token.get("id")
        if not isinstance(token_id, int):
            if isinstance(token_id, tuple) and token_id[1] == "-":
                skip_until = token_id[2]
                yield token
            continue
        if token_id > skip_until:
            yield token


def _no_space_after(token: Token) -> bool:
    misc = token.get("misc")
    return isinstance(misc, dict) and misc.get("SpaceAfter") == "No"


def text_from_tokens(tokens: TokenList) -> str:
    """The sentence text implied by the surface forms and their ``SpaceAfter=No`` marks."""
    parts: list[str] = []
    for token in _surface_tokens(tokens):
        parts.append(str(token["form"]))
        parts.append("" if _no_space_after(token) else " ")
    return "".join(parts[:-1])


def space_after_from_text(words: Sequence[str], text: str) -> list[bool] | None:
    """Whether each word is followed by whitespace in ``text``, or None when the words do not spell the text.

    The last word is always given a space: ``SpaceAfter=No`` at a sentence end would be wrong before a new
    paragraph or document.
    """
    pos = 0
    space_after: list[bool] = []
    for word in words:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if not text.startswith(word, pos):
            return None
        pos += len(word)
        space_after.append(pos >= len(text) or text[pos].isspace())
    if text[pos:].strip():
        return None
    if space_after:
        space_after[-1] = True
    return space_after


def _clean_text(text: str) -> str:
    """One line without trailing whitespace, as ``# text`` requires."""
    return re.sub(r"[\t\r\n\v\f]+", " ", text).strip()


def _check_form(word: str, ordinal: int) -> None:
    if not word or word != word.strip() or any(c in word for c in "\t\n\r"):
        raise UsageError(f"sentence {ordinal}: cannot write the word {word!r} in CoNLL format "
                         "(empty, or with a tab, line break or surrounding space)")


class SentIds:
    """Hands out sentence ids unique within one output stream (the UD validator rejects repeats)."""

    def __init__(self) -> None:
        self._used: set[str] = set()

    def claim(self, wanted: str | None, ordinal: int) -> str:
        base = re.sub(r"\s+", "_", wanted.strip()) if wanted and wanted.strip() else str(ordinal)
        sent_id, k = base, 1
        while sent_id in self._used:
            k += 1
            sent_id = f"{base}-{k}"
        self._used.add(sent_id)
        return sent_id


def _fresh_tokens(sentence: Sentence, ordinal: int) -> tuple[TokenList, str]:
    """A TokenList for a Sentence that has no CoNLL-U source, and its text."""
    n = len(sentence.words)
    space_after = None
    text = _clean_text(sentence.text) if sentence.text else ""
    if text:
        space_after = space_after_from_text(sentence.words, text)
    if space_after is None:
        space_after = [True] * n
        text = " ".join(sentence.words)
    tokens = TokenList([
        Token(
            id=i + 1,
            form=sentence.words[i],
            lemma="_",
            upos=sentence.upos[i] if sentence.upos and sentence.upos[i] not in ("", "_") else "X",
            xpos=sentence.xpos[i] if sentence.xpos and sentence.xpos[i] not in ("", "_") else None,
            feats=None,
            head=None,
            deprel=None,
            deps=None,
            misc=None if space_after[i] else {"SpaceAfter": "No"},
        )
        for i in range(n)
    ])
    return tokens, text


def _copy_source(source: TokenList) -> TokenList:
    """A per-token copy with exactly the ten CoNLL-U fields, so filling HEAD/DEPREL never mutates the
    caller's TokenList and a hand-built source with missing keys still serialises to ten columns."""
    return TokenList([Token((field, token.get(field)) for field in DEFAULT_FIELDS) for token in source])


def conllu_tokens(sentence: Sentence, ordinal: int, sent_ids: SentIds) -> TokenList:
    """The TokenList (with metadata) that represents ``sentence`` in CoNLL-U output."""
    if not sentence.words:
        raise UsageError(f"sentence {ordinal}: cannot write an empty sentence in CoNLL-U")
    for word in sentence.words:
        _check_form(word, ordinal)
    source = sentence.source if isinstance(sentence.source, TokenList) else None
    metadata: dict[str, Any] = {}
    text: str
    if source is not None and sum(isinstance(t.get("id"), int) for t in source) == len(sentence.words):
        tokens = _copy_source(source)
        metadata.update(getattr(source, "metadata", None) or {})
        text = metadata.get("text") or sentence.text or text_from_tokens(tokens)
    else:
        tokens, text = _fresh_tokens(sentence, ordinal)
        metadata.update({k: v for k, v in sentence.metadata.items() if k not in ("sent_id", "text")})
    words = [t for t in tokens if isinstance(t.get("id"), int)]
    if sentence.heads is not None:
        if len(sentence.heads) != len(words):
            raise UsageError(f"sentence {ordinal}: {len(sentence.heads)} heads for {len(words)} words")
        deprels = sentence.deprels if sentence.deprels is not None else default_deprels(sentence.heads)
        if len(deprels) != len(words):
            raise UsageError(f"sentence {ordinal}: {len(deprels)} labels for {len(words)} words")
        for token, head, deprel, fallback in zip(words, sentence.heads, deprels, default_deprels(sentence.heads)):
            token["head"] = head
            token["deprel"] = deprel if deprel not in (None, "", "_") else fallback
        _add_head_probs(sentence, words)
    for token in words:
        if parse_nullable_value(token.get("upos")) is None:
            token["upos"] = "X"
    sent_id = sent_ids.claim(sentence.sent_id or metadata.get("sent_id"), ordinal)
    # Keep the user's comment order, replacing the two comments we manage; a new sent_id goes after any
    # newdoc/newpar line (UD's usual order), a new text at the end.
    ordered = Metadata()
    for key, value in metadata.items():
        if "sent_id" not in ordered and not key.startswith(("newdoc", "newpar")):
            ordered["sent_id"] = sent_id
        ordered[key] = sent_id if key == "sent_id" else _clean_text(str(text)) if key == "text" else value
    ordered.setdefault("sent_id", sent_id)
    ordered.setdefault("text", _clean_text(str(text)))
    tokens.metadata = ordered
    return tokens


def _add_head_probs(sentence: Sentence, words: list[Token]) -> None:
    """``parse --probs``: append ``HeadProb=`` (the chosen head's probability, 4 decimals) to each word's MISC,
    after what it holds (``SpaceAfter=No`` …), in a new dict so the sentence's source stays as it was.  A
    ``HeadProb`` the input carried (an earlier ``--probs`` parse) is dropped from every word first: it belongs
    to heads this parse replaced, and a word with no probability now (punctuation, no ``--probs``) gets none."""
    for index, token in enumerate(words):
        misc = token.get("misc")
        kept = {k: v for k, v in misc.items() if k != "HeadProb"} if isinstance(misc, dict) else {}
        prob = sentence.head_prob(index)
        if prob is not None:
            kept["HeadProb"] = f"{prob:.4f}"
        token["misc"] = kept or (None if isinstance(misc, dict) or misc is None else misc)


def without_enhanced_graph(tokens: TokenList) -> TokenList:
    """A copy of ``tokens`` without the enhanced graph — DEPS ``_`` and no empty node, whose only attachment is
    DEPS — for a sentence whose tree is a prediction: the input's enhanced graph is gold annotation that no parse
    predicts, and kept half (DEPS without empty nodes) it fails ``udvalidate --level 2``."""
    kept = TokenList([Token((field, None if field == "deps" else token.get(field)) for field in DEFAULT_FIELDS)
                      for token in tokens if not (isinstance(token.get("id"), tuple) and token["id"][1] == ".")])
    kept.metadata = Metadata(getattr(tokens, "metadata", None) or {})
    return kept


def plain_conllu_tokens(sentence: Sentence, ordinal: int) -> TokenList:
    """The sentence's syntactic words only, without comments: what MaltEval's reader takes (it accepts no
    comment, multiword-token or empty-node line).  DEPS is emptied, since it may name the dropped empty nodes;
    MISC (``SpaceAfter=No``) is kept.  Still valid CoNLL-U, but without the ``# sent_id``/``# text`` that
    ``udvalidate --level 2`` asks for: that is :func:`write_conllu` with ``full=True``."""
    full = conllu_tokens(sentence, ordinal, SentIds())
    words = TokenList([t for t in full if isinstance(t.get("id"), int)])
    for token in words:
        token["deps"] = None
    words.metadata = Metadata()
    return words


def write_conllu(sentences: Iterable[Sentence], stream: TextIO, *, full: bool = False) -> int:
    """Write sentences as CoNLL-U, one at a time; returns how many were written.

    By default the MaltEval-safe form (:func:`plain_conllu_tokens`); ``full`` writes the UD form with
    ``# sent_id``/``# text``, every comment and the multiword tokens and empty nodes of CoNLL-U input."""
    sent_ids = SentIds()
    count = 0
    for count, sentence in enumerate(sentences, start=1):
        tokens = conllu_tokens(sentence, count, sent_ids) if full else plain_conllu_tokens(sentence, count)
        stream.write(tokens.serialize())
    return count


def write_conllu_full(sentences: Iterable[Sentence], stream: TextIO) -> int:
    """:func:`write_conllu` in the full UD form (``parse --full-ud``; what ``preprocess`` writes)."""
    return write_conllu(sentences, stream, full=True)


def format_conllu(sentence: Sentence) -> str:
    """One sentence as a CoNLL-U block (ending with its blank line), e.g. for logging or tests."""
    return conllu_tokens(sentence, 1, SentIds()).serialize()


__all__ = [
    "UPOS_TAGS",
    "default_deprels",
    "format_conllu",
    "parse_conllu_text",
    "read_conllu",
    "space_after_from_text",
    "text_from_tokens",
    "plain_conllu_tokens",
    "without_enhanced_graph",
    "write_conllu",
    "write_conllu_full",
]
