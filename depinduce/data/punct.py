"""Which tokens count as punctuation: one rule, decided from the input alone, for every command.

evaluation.md fixes the scoring rules: on PTB-tagged data a token is punctuation when its PTB tag is not a word
tag (``, . : `` '' -LRB- -RRB- # $`` and the trace tag ``-NONE-``); on UD data when its UPOS is ``PUNCT``
(``SYM`` is kept).  For raw text, where no tags exist, the token's shape decides.

Which of the three applies to a sentence is decided here, once (:func:`sentence_punct_rule`), and ``parse`` (what
it hides from the model), ``eval`` (what it leaves out), ``show``, ``preprocess`` and ``analyze`` all call
:func:`sentence_punct_mask`: so what ``parse`` hid is what ``eval`` skips, whatever the input's format.  The
order: an explicit ``# punct_rule = ptb|ud|shape`` comment; else the UD rule when the UPOS column holds UD tags;
else the PTB filter when either POS column holds PTB tags (XPOS first — Penn2Malt's CoNLL-X has the PTB tag in
CPOSTAG and POSTAG, and CPOSTAG is UPOS to a CoNLL-U reader; a bracketed tree's preterminals are its XPOS);
else the token's shape.  A column "holds" a tag set when every tag in it belongs to the set (``_`` is no tag),
and a UPOS column of nothing but ``X`` (what depinduce writes for "no tag") holds none.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from depinduce.io.conllu_format import UPOS_TAGS
from depinduce.structures.spans import tree_tags

if TYPE_CHECKING:
    from depinduce.structures.sentence import Sentence

PunctRule = Literal["ptb", "ud", "shape"]
PUNCT_RULE_NAMES: tuple[str, ...] = ("ptb", "ud", "shape")

PTB_PUNCT_TAGS: frozenset[str] = frozenset({",", ".", ":", "``", "''", "-LRB-", "-RRB-", "#", "$", "-NONE-"})
# The WSJ treebank's 45 tags and the trace tag: a column of these is PTB-tagged.
PTB_TAGS: frozenset[str] = PTB_PUNCT_TAGS | frozenset(
    "CC CD DT EX FW IN JJ JJR JJS LS MD NN NNS NNP NNPS PDT POS PRP PRP$ RB RBR RBS RP SYM TO UH VB VBD VBG VBN VBP "
    "VBZ WDT WP WP$ WRB".split()
)
UD_PUNCT_UPOS = "PUNCT"
_NO_TAG = ("_", "")

# Tokens TreebankWordTokenizer produces for brackets and quotes, which are punctuation whatever their letters.
_PUNCT_TOKENS: frozenset[str] = frozenset({"``", "''", "-LRB-", "-RRB-", "-LSB-", "-RSB-", "-LCB-", "-RCB-"})
# Symbols Unicode files under punctuation (Po) that stand for words: UD tags them SYM, CCONJ or ADP, the PTB NN, CC
# or IN (its ``#`` tag aside) — so the shape rule keeps them, as it keeps ``$`` (Sc).
WORD_SYMBOLS: frozenset[str] = frozenset("%‰‱&#@％＆＃＠﹪﹠﹟﹫")


def is_punct_tag(tag: str) -> bool:
    """True for a PTB tag outside the word tags (the papers' word-tag filter)."""
    return tag in PTB_PUNCT_TAGS


def is_punct_form(token: str) -> bool:
    """True when every character of ``token`` is Unicode punctuation (P*), or it is a PTB bracket/quote token.

    Symbols are words for this rule, as UD's ``SYM`` is: ``$`` (Sc) and the word-like ``%``, ``&``, ``#``, ``@``
    that Unicode files under Po (:data:`WORD_SYMBOLS`); so are tokens mixing letters or digits with punctuation
    (``U.S.``, ``3.5``, ``n't``).
    """
    if token in _PUNCT_TOKENS:
        return True
    return bool(token) and all(unicodedata.category(ch).startswith("P") and ch not in WORD_SYMBOLS for ch in token)


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


def holds_ud_tags(upos: Sequence[str] | None) -> bool:
    """True for a UPOS column of UD tags, not all of them ``X`` (depinduce's writers' "no tag")."""
    tags = [tag for tag in upos or () if tag not in _NO_TAG]
    return bool(tags) and all(tag in UPOS_TAGS for tag in tags) and any(tag != "X" for tag in tags)


def holds_ptb_tags(column: Sequence[str | None] | None) -> bool:
    """True for a POS column of PTB tags (:data:`PTB_TAGS`)."""
    tags = [tag for tag in column or () if tag not in (None, *_NO_TAG)]
    return bool(tags) and all(tag in PTB_TAGS for tag in tags)


def _xpos(sentence: "Sentence") -> Sequence[str | None] | None:
    """XPOS, or for a gold tree without it the preterminal tags (None above a bare word)."""
    if sentence.xpos is not None or sentence.tree is None:
        return sentence.xpos
    tags = tree_tags(sentence.tree)
    return tags if len(tags) == len(sentence.words) else None


def ptb_tag_column(sentence: "Sentence") -> Sequence[str | None] | None:
    """The POS column that holds the sentence's PTB tags: XPOS (or its tree's tags), else UPOS; None if neither."""
    return next((column for column in (_xpos(sentence), sentence.upos) if holds_ptb_tags(column)), None)


def sentence_punct_rule(sentence: "Sentence", rule: PunctRule | Literal["auto"] = "auto") -> PunctRule:
    """The rule for ``sentence``: ``rule`` itself unless ``auto``, else the one order of the module docstring.

    depinduce's PTB preprocessing writes ``# punct_rule = ptb`` because its UPOS column is mapped to UD tags and
    would otherwise select the UD rule (``$`` is SYM there, a PTB punctuation tag).
    """
    if rule != "auto":
        return rule
    declared = sentence.metadata.get("punct_rule")
    if declared in PUNCT_RULE_NAMES:
        return declared  # type: ignore[return-value]
    if holds_ud_tags(sentence.upos):
        return "ud"
    if ptb_tag_column(sentence) is not None:
        return "ptb"
    return "shape"


def sentence_punct_mask(sentence: "Sentence", rule: PunctRule | Literal["auto"] = "auto") -> list[bool]:
    """Punctuation flags for a :class:`~depinduce.structures.sentence.Sentence` under ``rule`` (``auto``:
    :func:`sentence_punct_rule`).  The PTB filter reads the column that holds PTB tags (XPOS when none does)."""
    chosen = sentence_punct_rule(sentence, rule)
    tags = (ptb_tag_column(sentence) or _xpos(sentence)) if chosen == "ptb" else None
    xpos = None if tags is None else [tag or "_" for tag in tags]
    return punct_mask(sentence.words, rule=chosen, xpos=xpos, upos=sentence.upos)
