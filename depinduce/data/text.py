"""Raw text for unsupervised training: sentence splitting and tokenisation.

nltk's punkt models are not assumed to be installed (and need a download), so sentences are split by rule:
a blank line always ends a sentence; inside a paragraph a sentence ends at ``.``, ``!`` or ``?`` (plus any
closing quotes or brackets) followed by whitespace and a word that starts with a capital letter, a digit or an
opening quote/bracket — unless the period belongs to a known abbreviation (``Mr.``, ``Corp.``; ``No.`` and
``Nov.`` only before a number), an initial (``J.``) or a dotted acronym (``U.S.``).  With ``one_per_line`` every
non-blank line is a sentence.  Sentences are tokenised with nltk's TreebankWordTokenizer, the PTB's own
conventions (``don't`` → ``do n't``).  NLTK corpora (``brown``) come tokenised by their makers, who keep clitics on
their words (``that's``, ``atlanta's``); those tokens are split the PTB's way (``that 's``), so that the extra text and
the treebank share one vocabulary for them (:func:`read_nltk_corpus`).

Chinese and Japanese are written without spaces between words, and no rule here can find their words; text in
them must come pre-tokenised (one sentence per line, tokens separated by spaces, as the treebank's own tokens
are) and is read by :func:`read_pretokenized_file`.  :func:`check_pretokenized` catches text that is not: a
space-free chunk longer than :data:`MAX_UNSPACED_TOKEN` characters holding a Han, Hiragana or Katakana character
is an error located at its line (the longest such token in the shared Chinese and Japanese GSD treebanks has 9
characters; an untokenised sentence is a whole clause).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import cache
from typing import TYPE_CHECKING

from depinduce.structures.sentence import Sentence
from depinduce.errors import InputError, NotFoundError, UsageError
from depinduce.io.lines import display_name, read_text

if TYPE_CHECKING:
    from nltk.tokenize import TreebankWordTokenizer

# Lower-cased abbreviations (without the final period) that do not end a sentence before a capitalised word.
ABBREVIATIONS: frozenset[str] = frozenset(
    """
    mr mrs ms messrs dr prof sr jr st mt ft gen col lt maj sgt capt cmdr adm gov sen rep rev hon pres supt
    insp det atty
    inc corp co ltd bros assn dept univ
    e.g i.e cf vs viz al
    ave blvd rd hwy
    calif colo conn fla ga ill ind kan ky la md mass mich minn miss mo mont neb nev okla ore pa penn tenn tex
    va vt wash wis wyo ariz ark del
    """.split()
)

# Abbreviations that end no sentence only before a number ("No. 5", "Nov. 29"); "said no." still ends one.
NUMBER_ABBREVIATIONS: frozenset[str] = frozenset(
    """
    no nos vol vols fig figs pp ch sec art p
    jan feb mar apr jun jul aug sep sept oct nov dec
    """.split()
)

_CANDIDATE = re.compile(r"[.!?]+[\"'’”)\]»]*(?=\s)")
_OPENERS = "\"'‘“([«"
_ACRONYM = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")
_PARAGRAPH = re.compile(r"\n[ \t\r\f\v]*\n")

# Han (with the iteration marks 々〆〇), Hiragana and Katakana (with the half-width forms and CJK extensions).
_UNSPACED = re.compile("[\u3005-\u3007\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
                       "\uff66-\uff9f\U00020000-\U0003134f]")
MAX_UNSPACED_TOKEN = 12
PRETOKENIZED_NOTE = ("must come pre-tokenised like the treebank: one sentence per line, tokens separated by spaces "
                     f"(a space-free chunk of more than {MAX_UNSPACED_TOKEN} characters with Chinese/Japanese "
                     "characters is an error)")


def _starts_sentence(text: str, pos: int) -> bool:
    """Whether the word at ``pos`` (after whitespace) can begin a sentence: capital, digit or opening quote."""
    while pos < len(text) and text[pos] in _OPENERS:
        pos += 1
    return pos < len(text) and (text[pos].isupper() or text[pos].isdigit())


def _is_abbreviation(text: str, period: int, next_char: str) -> bool:
    """Whether the ``.`` at ``period`` closes an abbreviation, an initial or a dotted acronym."""
    start = period
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    word = text[start:period].lstrip(_OPENERS)
    if not word:
        return False
    if len(word) == 1 and word.isalpha() and word.isupper():
        return True
    lower = word.lower()
    if lower in NUMBER_ABBREVIATIONS:
        return next_char.isdigit()
    return lower in ABBREVIATIONS or bool(_ACRONYM.fullmatch(word))


def split_paragraph(paragraph: str) -> list[str]:
    """Sentences of one paragraph (line breaks inside it are spaces)."""
    text = " ".join(paragraph.split())
    sentences: list[str] = []
    start = 0
    for match in _CANDIDATE.finditer(text):
        end = match.end()
        if not _starts_sentence(text, end + 1):
            continue
        if match.group().startswith(".") and len(match.group().rstrip("\"'’”)]»")) == 1:
            if _is_abbreviation(text, match.start(), text[end + 1]):
                continue
        sentences.append(text[start:end].strip())
        start = end + 1
    rest = text[start:].strip()
    if rest:
        sentences.append(rest)
    return [s for s in sentences if s]


def split_sentences(text: str, *, one_per_line: bool = False) -> list[str]:
    """Sentences of a text: one per non-blank line, or by the rules in the module docstring."""
    if one_per_line:
        return [line.strip() for line in text.split("\n") if line.strip()]
    return [s for paragraph in _PARAGRAPH.split(text) for s in split_paragraph(paragraph)]


@cache
def _tokenizer() -> TreebankWordTokenizer:
    """Made on first use: importing nltk takes a third of a second (and numpy), which `preprocess --help`,
    reading :data:`NLTK_CORPORA`, must not wait for."""
    from nltk.tokenize import TreebankWordTokenizer

    return TreebankWordTokenizer()


def tokenize(sentence: str) -> list[str]:
    """Treebank tokens of one sentence."""
    return _tokenizer().tokenize(sentence)


def _line_starts(text: str, sentences: Sequence[str]) -> Iterator[int]:
    """The 1-based line on which each sentence begins (sentences appear in order in ``text``)."""
    pos = 0
    line = 1
    for sentence in sentences:
        first = sentence.split(None, 1)[0]
        found = text.find(first, pos)
        if found < 0:
            yield line
            continue
        line += text.count("\n", pos, found)
        pos = found
        yield line


def _checked_text(path: str, name: str) -> str:
    """The text of ``path``, refused when empty or binary (a NUL byte), with the line that shows it."""
    text = read_text(path)
    if not text.strip():
        raise InputError(name, 1, "empty file: no text")
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise InputError(name, line, "NUL byte: this looks like a binary file, not text")
    return text


def read_text_file(path: str, *, one_per_line: bool = False) -> list[Sentence]:
    """Tokenised sentences of a UTF-8 text file (``-`` = standard input), with their line numbers."""
    name = display_name(path)
    text = _checked_text(path, name)
    strings = split_sentences(text, one_per_line=one_per_line)
    sentences = []
    for number, (string, line) in enumerate(zip(strings, _line_starts(text, strings)), start=1):
        # Treebank rules split off only a string's final period, so a line holding several sentences is
        # tokenised piece by piece (it stays one sentence).
        pieces = split_paragraph(string) if one_per_line else [string]
        words = [token for piece in pieces for token in tokenize(piece)]
        if words:
            sentences.append(Sentence(words=words, sent_id=f"{name}:{number}", text=string, line=line))
    return sentences


def unspaced_share(words: Sequence[str]) -> float:
    """The share of letters in ``words`` that are Han, Hiragana or Katakana (0 for no letters)."""
    letters = unspaced = 0
    for word in words:
        for ch in word:
            if ch.isalpha():
                letters += 1
                unspaced += bool(_UNSPACED.match(ch))
    return unspaced / letters if letters else 0.0


def check_pretokenized(sentences: Sequence[Sentence], name: str) -> None:
    """Raise a located error for the first token that shows the text was not tokenised (module docstring)."""
    for sentence in sentences:
        for word in sentence.words:
            if len(word) > MAX_UNSPACED_TOKEN and _UNSPACED.search(word):
                shown = word if len(word) <= 2 * MAX_UNSPACED_TOKEN else word[: 2 * MAX_UNSPACED_TOKEN] + "…"
                raise InputError(name, sentence.line, f"{len(word)} characters without a space ({shown}): Chinese/"
                                 "Japanese text must come pre-tokenised, one sentence per line with tokens "
                                 "separated by spaces")


def read_pretokenized_file(path: str) -> list[Sentence]:
    """Sentences of a pre-tokenised UTF-8 file: one per non-blank line, tokens split at whitespace, checked."""
    name = display_name(path)
    text = _checked_text(path, name)
    sentences = [Sentence(words=line.split(), sent_id=f"{name}:{number}", text=line.strip(), line=number)
                 for number, line in enumerate(text.split("\n"), start=1) if line.strip()]
    check_pretokenized(sentences, name)
    return sentences


NLTK_CORPORA = ("brown",)


def require_nltk_corpus(name: str, alternative: str = "") -> None:
    """Refuse, in one line saying how to get it, an NLTK corpus that is not installed."""
    import nltk.corpus

    try:
        getattr(nltk.corpus, name).fileids()  # the corpus reader finds a folder or a zip, as reading will
    except LookupError:
        raise NotFoundError(f"NLTK's {name} corpus is not installed: run `python -m nltk.downloader {name}`"
                            + (f" ({alternative})" if alternative else "")) from None


# A token with an apostrophe next to a letter: a clitic the PTB would split (``that's``, ``can't``, ``boys'``).
_CLITIC = re.compile(r"[A-Za-z]'|'[A-Za-z]")


def ptb_clitics(words: Sequence[str]) -> list[str]:
    """``words`` with clitics split as the PTB splits them (``atlanta's`` → ``atlanta 's``, ``can't`` → ``ca n't``).

    Only tokens holding an apostrophe beside a letter go through the Treebank tokenizer, one at a time: given a
    whole sentence it would also split a final ``jr.`` and turn Brown's closing quotes into opening ones."""
    return [piece for word in words for piece in (tokenize(word) if _CLITIC.search(word) else (word,))]


def read_nltk_corpus(name: str) -> list[Sentence]:
    """The sentences of an NLTK corpus (tokenised by its makers; clitics split the PTB's way, module docstring)."""
    if name not in NLTK_CORPORA:
        raise UsageError(f"unknown NLTK corpus {name!r}; choose one of {', '.join(NLTK_CORPORA)}")
    import nltk.corpus

    require_nltk_corpus(name)
    corpus = getattr(nltk.corpus, name)
    sentences = []
    for fileid in corpus.fileids():
        for number, words in enumerate(corpus.sents(fileid), start=1):
            if words:
                sentences.append(Sentence(words=ptb_clitics(words), sent_id=f"{name}/{fileid}:{number}"))
    return sentences
