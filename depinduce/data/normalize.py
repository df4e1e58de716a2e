"""Word normalisation: the model's view of a word.

The papers train on lower-cased text with numbers folded (Mikolov's PTB replaces numbers by ``N``); depinduce
does the same by default and records the settings in ``vocab.json``, so ``parse`` normalises new text exactly as
the training text was.  Digit runs become ``N`` *after* lower-casing, so the placeholder stays distinct from
the word "n".  A digit is any Unicode decimal digit (category Nd: ``0-9`` and also ``٣``, ``५``, full-width
``０``), which is what ``\\d`` matches in a ``str`` pattern; so every script's numbers fold.  Characters that are
numeric without being decimal digits (``²``, ``①``, ``三``) stay words.  Whitespace inside a word (possible in
some UD treebanks) becomes ``_`` because the ``.txt`` files separate words by spaces.

Normalising is idempotent on numbers: a word in which ``N`` is the only cased letter (``N``, ``N.N``, ``$N``,
``N%``, ``N年``: what folding writes) keeps it, so text already in the model's view (``train.txt`` from
``preprocess text`` given as ``--extra-text``, ``test.txt`` given to ``parse --tokenized``) reaches the
vocabulary as it was written; lower-casing it again would turn every number into the word "n".  The price: a raw
word that is a capital N without other cased letters (``N``, ``N.``) is read as a number; with an apostrophe it
stays a word (French ``N'``).  Placeholders fused with cased letters (``Ns`` from "1980s", ``Nth``) are not
recognised and lower-case again.  Vocabularies written by earlier versions (the bundled model's included)
normalise as before except for those capital-N words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache

from depinduce.errors import UsageError

_DIGITS = re.compile(r"\d+")  # str pattern without re.ASCII: Unicode category Nd
_SPACE = re.compile(r"\s+")
NUMBER_TOKEN = "N"
_APOSTROPHES = ("'", "\u2019")  # French "N'" / "N’" is the word n', not a number


def _is_folded_number(word: str) -> bool:
    """Whether ``word`` looks like folding's output: it has the placeholder and no other cased letter (so
    lower-casing could only change the placeholder) and no apostrophe."""
    return (NUMBER_TOKEN in word and not any(a in word for a in _APOSTROPHES)
            and not any(ch != NUMBER_TOKEN and ch.lower() != ch.upper() for ch in word))


def fold_digit_runs(word: str) -> str:
    """``word`` with every run of Unicode decimal digits (category Nd) replaced by ``N``."""
    return _DIGITS.sub(NUMBER_TOKEN, word)


@lru_cache(maxsize=1 << 18)
def _normalize(word: str, lowercase: bool, fold_digits: bool) -> str:
    """Cached: a corpus repeats its words, and the regexes dominate preprocessing time otherwise."""
    if lowercase and not (fold_digits and _is_folded_number(word)):
        word = word.lower()
    if fold_digits:
        word = fold_digit_runs(word)
    return _SPACE.sub("_", word)


@dataclass(frozen=True)
class Normalization:
    """How words are normalised before they reach a model."""

    lowercase: bool = True
    fold_digits: bool = True

    def word(self, word: str) -> str:
        return _normalize(word, self.lowercase, self.fold_digits)

    def words(self, words: Iterable[str]) -> list[str]:
        return [_normalize(w, self.lowercase, self.fold_digits) for w in words]

    def as_dict(self) -> dict[str, bool]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> "Normalization":
        unknown = set(data) - {"lowercase", "fold_digits"}
        if unknown or not all(isinstance(v, bool) for v in data.values()):
            raise UsageError(f"invalid normalization settings {dict(data)!r}; expected booleans "
                             "'lowercase' and 'fold_digits'")
        return cls(**data)  # type: ignore[arg-type]


def overlap_key(words: Iterable[str]) -> tuple[str, ...]:
    """A canonical form of a sentence for leak checks: lower-cased, digits folded, only tokens with letters or digits.

    Treebank punctuation (tag-based) and raw-text punctuation (shape-based) disagree on tokens such as ``$``;
    comparing only alphanumeric tokens makes the same sentence match whichever source it came from.
    """
    return tuple(_normalize(w, True, True) for w in words if any(c.isalnum() for c in w))
