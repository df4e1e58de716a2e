"""One parse batch as it passes through the steps, and the hide-punctuation step that starts it.

The backend's input view (``Backend.input_view``) says which tokens it does not see: punctuation, by the rule
``eval`` removes it by, for every backend that reads words; nothing for one that reads whole sentences (RNGTr).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from depinduce.errors import InputError
from depinduce.io.initial_graphs import InitialGraph
from depinduce.models.base import Backend, ParseScores
from depinduce.structures.sentence import Sentence


@dataclass
class Batch:
    """Sentences of one batch with what each step adds: ``hidden`` (the hide step), ``scores`` (the score step,
    by sentence index, for the sentences with visible words) and ``heads`` (the decode step: heads over the
    visible words, 1-based, 0 = ROOT)."""

    sentences: list[Sentence]
    hidden: list[list[bool]]
    init: list[InitialGraph | None] | None = None
    scores: dict[int, ParseScores] = field(default_factory=dict)
    heads: dict[int, list[int]] = field(default_factory=dict)

    @property
    def visible(self) -> list[list[str]]:
        """The words each sentence shows the backend."""
        return [[w for w, h in zip(s.words, mask) if not h] for s, mask in zip(self.sentences, self.hidden)]

    @property
    def nonempty(self) -> list[int]:
        """The sentences with a visible word: an all-punctuation sentence needs no model."""
        return [k for k, mask in enumerate(self.hidden) if not all(mask)]


def hide_punctuation(sentences: Sequence[Sentence], backend: Backend,
                     init: Sequence[InitialGraph | None] | None = None) -> Batch:
    """The hide step: a batch whose ``hidden`` masks are what the backend's input view hides."""
    view = backend.input_view
    return Batch(list(sentences), [view.hidden(s) for s in sentences], None if init is None else list(init))


def check_lengths(batch: Batch, backend: Backend, max_words: int | None, source: str) -> None:
    """A backend that scores every pair of the words it sees (``input_view.pairwise``) is refused, in one line, a
    sentence longer than ``max_words`` visible words before its memory runs out."""
    if max_words is None or not backend.input_view.pairwise:
        return
    for k in batch.nonempty:
        n = len(batch.hidden[k]) - sum(batch.hidden[k])
        if n > max_words:
            sentence = batch.sentences[k]
            raise InputError(
                source, sentence.line,
                f"sentence {sentence.sent_id or k + 1} has {n:,} words for the model; model '{backend.name}' "
                "scores every pair of words, so memory grows with the square of the length, and the limit is "
                f"{max_words:,} words (--max-words N raises it)")
