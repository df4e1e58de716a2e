"""Which tokens count as punctuation — the word-tag filter of the papers and the UD rule.

evaluation.md fixes the scoring rules: on PTB-tagged data a token is punctuation when its XPOS is not a word
tag (``, . : `` '' -LRB- -RRB- # $`` and the trace tag ``-NONE-``); on UD data when its UPOS is ``PUNCT``
(``SYM`` is kept).  For raw text, where no tags exist, the token's shape decides.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from depinduce.structures.sentence import Sentence

PunctRule = Literal["ptb", "ud", "shape"]

PTB_PUNCT_TAGS: frozenset[str] = frozenset({",", ".", ":", "``", "''", "-LRB-", "-RRB-", "#", "$", "-NONE-"})
UD_PUNCT_UPOS = "PUNCT"

# Tokens TreebankWordTokenizer produces for brackets and quotes, which are punctuation whatever their letters.
_PUNCT_TOKENS: frozenset[str] = frozenset({"``", "''", "-LRB-", "-RRB-", "-LSB-", "-RSB-", "-LCB-", "-RCB-"})


def is_punct_tag(tag: str) -> bool:
    """True for a PTB tag outside the word tags (the papers' word-tag filter)."""
    return tag in PTB_PUNCT_TAGS


def is_punct_form(token: str) -> bool:
    """True when every character of ``token`` is Unicode punctuation (P*), or it is a PTB bracket/quote token.

    Symbols (S*) such as ``$`` or ``%`` are words for this rule, as UD's ``SYM`` is; so are tokens mixing letters
    or digits with punctuation (``U.S.``, ``3.5``, ``n't``).
    """
    if token in _PUNCT_TOKENS:
        return True
    return bool(token) and all(unicodedata.category(ch).startswith("P") for ch in token)


def punct_mask(
    words: Sequence[str],
    *,
    rule: PunctRule,
    xpos: Sequence[str] | None = None,
    upos: Sequence[str] | None = None,
) -> list[bool]:
    """Per-token punctuation flags under ``rule``.

    ``ptb`` reads ``xpos`` and ``ud`` reads ``upos``; when the needed column is missing (or ``_``) the token's
    shape decides, so a text-only file never has punctuation silently scored as words.
    """
    out: list[bool] = []
    for i, word in enumerate(words):
        if rule == "ptb" and xpos is not None and xpos[i] not in ("_", ""):
            out.append(is_punct_tag(xpos[i]))
            continue
        if rule == "ud" and upos is not None and upos[i] not in ("_", ""):
            out.append(upos[i] == UD_PUNCT_UPOS)
            continue
        out.append(is_punct_form(word))
    return out


def auto_rule(
    metadata: dict[str, str] | None, upos: Sequence[str] | None, xpos: Sequence[str] | None
) -> PunctRule:
    """The rule a sentence's own annotation calls for.

    An explicit ``# punct_rule = ptb|ud|shape`` comment wins (depinduce's PTB preprocessing writes ``ptb``, since
    its UPOS column is mapped and would otherwise select the UD rule); then UPOS → ``ud``; then XPOS → ``ptb``;
    with no tags at all, the token shape.
    """
    declared = (metadata or {}).get("punct_rule")
    if declared in ("ptb", "ud", "shape"):
        return declared  # type: ignore[return-value]
    if upos is not None and any(tag not in ("_", "") for tag in upos):
        return "ud"
    if xpos is not None and any(tag not in ("_", "") for tag in xpos):
        return "ptb"
    return "shape"


def sentence_punct_mask(sentence: "Sentence", rule: PunctRule | Literal["auto"] = "auto") -> list[bool]:
    """Punctuation flags for a :class:`~depinduce.structures.sentence.Sentence` (``auto`` = :func:`auto_rule`)."""
    chosen = auto_rule(sentence.metadata, sentence.upos, sentence.xpos) if rule == "auto" else rule
    return punct_mask(sentence.words, rule=chosen, xpos=sentence.xpos, upos=sentence.upos)
