"""The word vocabulary: built from the training split only, saved as ``vocab.json`` next to the data and the model.

Index 0 is ``<pad>``, 1 ``<unk>``, 2 ``<mask>`` (for masked-LM backends); words follow by descending training
frequency, ties broken alphabetically, so the same corpus always gives the same indices.  The file also carries
the :class:`~depinduce.data.normalize.Normalization` the words went through, so new text is normalised the same
way before lookup.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from os import PathLike

from depinduce.data.files import read_format_json, to_json_text
from depinduce.data.schemas import MapOf, Opt, validate
from depinduce.display import shorten
from depinduce.io.outputs import atomic_write_text
from depinduce.data.normalize import Normalization
from depinduce.errors import DepinduceError, InputError, UsageError

PAD = "<pad>"
UNK = "<unk>"
MASK = "<mask>"
SPECIALS: tuple[str, ...] = (PAD, UNK, MASK)
FORMAT = "depinduce-vocab"
VERSION = 1
# vocab.json as read back: a field of the wrong type is one line naming it
SCHEMA = {"counts": Opt([int]), "normalization": Opt(MapOf(bool)), "min_freq": Opt(int),
          "max_vocab": Opt(int)}


class Vocab:
    """A bijection between words and indices, with the specials first and unknown words mapped to ``<unk>``."""

    pad_index = 0
    unk_index = 1
    mask_index = 2

    def __init__(
        self,
        words: Sequence[str],
        *,
        counts: Sequence[int] | None = None,
        normalization: Normalization | None = None,
        min_freq: int = 1,
        max_vocab: int | None = None,
    ) -> None:
        self.itos: list[str] = list(SPECIALS) + [w for w in words if w not in SPECIALS]
        self.stoi: dict[str, int] = {w: i for i, w in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise UsageError("vocabulary lists a word twice")
        self.counts: list[int] = list(counts) if counts is not None else []
        self.normalization = normalization or Normalization()
        self.min_freq = min_freq
        self.max_vocab = max_vocab

    @classmethod
    def build(
        cls,
        sentences: Iterable[Sequence[str]],
        *,
        min_freq: int = 2,
        max_vocab: int | None = None,
        normalization: Normalization | None = None,
    ) -> "Vocab":
        """Words of (already normalised) ``sentences`` seen at least ``min_freq`` times, the ``max_vocab`` most
        frequent of them when given (specials not counted)."""
        if min_freq < 1:
            raise UsageError(f"--min-freq must be at least 1, not {min_freq}")
        if max_vocab is not None and max_vocab < 1:
            raise UsageError(f"--max-vocab must be at least 1, not {max_vocab}")
        counter: Counter[str] = Counter()
        for sentence in sentences:
            counter.update(sentence)
        ranked = sorted(
            ((w, c) for w, c in counter.items() if c >= min_freq and w not in SPECIALS),
            key=lambda item: (-item[1], item[0]),
        )
        if max_vocab is not None:
            ranked = ranked[:max_vocab]
        return cls(
            [w for w, _ in ranked],
            counts=[c for _, c in ranked],
            normalization=normalization,
            min_freq=min_freq,
            max_vocab=max_vocab,
        )

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, word: object) -> bool:
        return word in self.stoi

    def index(self, word: str) -> int:
        """Index of an already normalised word; ``<unk>`` for words outside the vocabulary."""
        return self.stoi.get(word, self.unk_index)

    def encode(self, words: Iterable[str], *, normalize: bool = True) -> list[int]:
        """Indices of raw ``words`` (normalised first unless ``normalize=False``)."""
        if normalize:
            return [self.index(self.normalization.word(w)) for w in words]
        return [self.index(w) for w in words]

    def decode(self, indices: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in indices]

    def to_dict(self) -> dict[str, object]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "specials": {"pad": PAD, "unk": UNK, "mask": MASK},
            "normalization": self.normalization.as_dict(),
            "min_freq": self.min_freq,
            "max_vocab": self.max_vocab,
            "size": len(self),
            "words": self.itos[len(SPECIALS):],
            "counts": self.counts,
        }

    def to_json(self) -> str:
        return to_json_text(self.to_dict())

    def save(self, path: str | PathLike[str]) -> None:
        atomic_write_text(path, self.to_json())

    @classmethod
    def load(cls, path: str | PathLike[str]) -> "Vocab":
        """Read ``vocab.json``; a malformed file is a one-line error naming it."""
        data = read_format_json(path, "vocabulary", FORMAT)
        words = data.get("words")
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise InputError(path, None, "\"words\" must be a list of strings")
        validate(data, SCHEMA, path)
        try:
            return cls(
                words,
                counts=data.get("counts") or [],
                normalization=Normalization.from_dict(data.get("normalization") or {}),
                min_freq=int(data.get("min_freq") or 1),
                max_vocab=data.get("max_vocab"),
            )
        except DepinduceError as exc:
            raise InputError(path, None, str(exc)) from None
        except (TypeError, ValueError, AttributeError) as exc:  # a field of the wrong kind
            raise InputError(path, None, f"not a depinduce vocabulary ({shorten(exc, 120)})") from None
