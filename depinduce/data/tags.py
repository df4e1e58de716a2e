"""UPOS tags and dependency labels as indices, for models that read tags and predict labels (RNGTr/SynTr).

Built from a training split only and saved beside the word vocabulary (``tags.json`` in a run directory), so a
loaded model maps tags and labels exactly as in training.  UPOS index 0 is padding and 1 an unseen tag; label
index 0 is a label never seen in training (a dev label, or the ``dep`` of an unlabelled initial parse), so the
label classifier has ``len(labels)`` classes and can never be right on it.  Labels are kept whole
(``nsubj:pass``); LAS compares their universal part.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from os import PathLike

from depinduce.data.files import read_format_json, to_json_text
from depinduce.io.outputs import atomic_write_text
from depinduce.structures.sentence import Sentence
from depinduce.errors import DepinduceError, InputError, UsageError

FORMAT = "depinduce-tag-vocab"
VERSION = 1
PAD_TAG = "<pad>"
UNK_TAG = "<unk>"


class TagVocab:
    """UPOS tags and dependency labels of the training split, in a fixed order (by descending frequency, ties
    alphabetically) so the same corpus always gives the same indices."""

    upos_pad_index = 0
    upos_unk_index = 1
    label_unk_index = 0

    def __init__(self, upos: Sequence[str], labels: Sequence[str]) -> None:
        self.upos_itos: list[str] = [PAD_TAG, UNK_TAG] + [t for t in upos if t not in (PAD_TAG, UNK_TAG)]
        self.label_itos: list[str] = [UNK_TAG] + [t for t in labels if t != UNK_TAG]
        self.upos_stoi = {t: i for i, t in enumerate(self.upos_itos)}
        self.label_stoi = {t: i for i, t in enumerate(self.label_itos)}
        if len(self.upos_stoi) != len(self.upos_itos) or len(self.label_stoi) != len(self.label_itos):
            raise UsageError("tag vocabulary lists a tag or label twice")

    @classmethod
    def build(cls, sentences: Iterable[Sentence]) -> "TagVocab":
        """Every UPOS tag and label that occurs in ``sentences`` (the training split)."""
        upos: Counter[str] = Counter()
        labels: Counter[str] = Counter()
        for sentence in sentences:
            upos.update(sentence.upos or [])
            labels.update(sentence.deprels or [])

        def ranked(counter: Counter[str]) -> list[str]:
            return [t for t, _ in sorted(counter.items(), key=lambda item: (-item[1], item[0]))]

        return cls(ranked(upos), ranked(labels))

    @property
    def n_upos(self) -> int:
        return len(self.upos_itos)

    @property
    def n_labels(self) -> int:
        return len(self.label_itos)

    def encode_upos(self, tags: Iterable[str]) -> list[int]:
        return [self.upos_stoi.get(t, self.upos_unk_index) for t in tags]

    def encode_labels(self, labels: Iterable[str]) -> list[int]:
        return [self.label_stoi.get(t, self.label_unk_index) for t in labels]

    def decode_labels(self, indices: Iterable[int]) -> list[str]:
        """Label strings for predicted ids; the unseen-label class (never a gold training target) reads ``dep``."""
        return ["dep" if i == self.label_unk_index else self.label_itos[i] for i in indices]

    def to_dict(self) -> dict[str, object]:
        return {"format": FORMAT, "version": VERSION, "upos": self.upos_itos[2:], "labels": self.label_itos[1:]}

    def to_json(self) -> str:
        return to_json_text(self.to_dict())

    def save(self, path: str | PathLike[str]) -> None:
        atomic_write_text(path, self.to_json())

    @classmethod
    def load(cls, path: str | PathLike[str]) -> "TagVocab":
        """Read a saved tag vocabulary; a missing or malformed file is a one-line error naming it."""
        data = read_format_json(path, "tag vocabulary", FORMAT)
        for key in ("upos", "labels"):
            value = data.get(key)
            if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
                raise InputError(path, None, f"\"{key}\" must be a list of strings")
        try:
            return cls(data["upos"], data["labels"])
        except DepinduceError as exc:
            raise InputError(path, None, str(exc)) from None
