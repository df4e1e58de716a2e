"""Word normalisation: the model's view of a word.

The papers train on lower-cased text with numbers folded (Mikolov's PTB replaces numbers by ``N``); depinduce
does the same by default and records the settings in ``vocab.json``, so ``parse`` normalises new text exactly as
the training text was.  Digit runs become ``N`` *after* lower-casing, so the placeholder stays distinct from
the word "n".  Normalising is idempotent on numbers: a word whose only letters are placeholders set apart by
non-letters (``N``, ``N.N``, ``N,N``, ``$N``, ``N%``: what folding writes) keeps them, so text already in the
model's view (``train.txt`` from ``preprocess text`` given as ``--extra-text``, ``test.txt`` given to ``parse
--tokenized`` or ``perplexity``) reaches the vocabulary as it was written, where lower-casing it again would turn
every number into the word "n".  The price: the rare raw word that is a capital N alone (``N``, ``N.``) is read as
a number.  Placeholders fused with letters (``Ns`` from "1980s", ``Nth``) are not recognised and lower-case again.
A digit is any Unicode decimal digit (category Nd: ``0-9`` and also ``٣``, ``५``, full-width
``０``), which is what ``\\d`` matches in a ``str`` pattern; so every script's numbers fold, and since folding was
never ASCII-only, vocabularies written by earlier versions (the bundled model's included) normalise exactly as
before.  Characters that are numeric without being decimal digits (``²``, ``①``, ``三``) stay words.
Whitespace inside a word (possible in some UD treebanks) becomes ``_`` because the ``.txt`` files separate words
by spaces.
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
# A folded number: placeholders separated by (and wrapped in) characters that are neither letters, digits, "_" nor
# apostrophes (French "N'" is the word n', not a number).
_FOLDED_NUMBER = re.compile(rf"[^\w']*{NUMBER_TOKEN}(?:[^\w']+{NUMBER_TOKEN})*[^\w']*")


def fold_digit_runs(word: str) -> str:
    """``word`` with every run of Unicode decimal digits (category Nd) replaced by ``N``."""
    return _DIGITS.sub(NUMBER_TOKEN, word)


@lru_cache(maxsize=1 << 18)
def _normalize(word: str, lowercase: bool, fold_digits: bool) -> str:
    """Cached: a corpus repeats its words, and the regexes dominate preprocessing time otherwise."""
    if lowercase and not (fold_digits and _FOLDED_NUMBER.fullmatch(word)):
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
