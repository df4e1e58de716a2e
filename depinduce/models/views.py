"""Input views: what a backend reads of each sentence, declared on its class (``Backend.input_view``).

The parse pipeline (:mod:`depinduce.pipeline`) asks the view, never a flag, which tokens the model does not see
(:meth:`InputView.hidden`), whether the input can feed it (:meth:`InputView.check`, :attr:`InputView.reads_text`)
and how to call the backend (:meth:`InputView.score`), so a backend that reads its input differently is one new
view, not another branch in the pipeline.

- :class:`VisibleWords` — the punctuation-free word forms (:meth:`Backend.parse_scores`); every unsupervised
  backend but the DMV.  Punctuation is hidden by the rule ``eval`` removes it by
  (:func:`depinduce.data.punct.sentence_punct_mask`), and re-attached to the tree afterwards.
- :class:`TaggedWords` — the same visible tokens as Sentences with their UPOS/XPOS (:meth:`Backend.parse_sentences`);
  the DMV, whose classes are tags.
- :class:`WholeSentences` — every token, punctuation included, each with its UPOS, and optionally one initial graph
  per sentence to refine (:meth:`Backend.parse_sentences`); RNGTr, trained on whole gold sentences.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from depinduce.data.punct import sentence_punct_mask
from depinduce.errors import InputError
from depinduce.io.initial_graphs import InitialGraph
from depinduce.structures.sentence import Sentence

if TYPE_CHECKING:
    from depinduce.models.scores import ParseScores


def visible_sentence(sentence: Sentence, hidden: Sequence[bool]) -> Sentence:
    """The tokens the model sees, with their UPOS/XPOS (what :class:`TaggedWords` gives a backend)."""
    def cut(values: Sequence[str] | None) -> list[str] | None:
        return None if values is None else [v for v, h in zip(values, hidden) if not h]

    return Sentence(words=cut(sentence.words) or [], upos=cut(sentence.upos), xpos=cut(sentence.xpos),
                    sent_id=sentence.sent_id, line=sentence.line)


class InputView(ABC):
    """How the pipeline feeds one backend: which tokens it hides, what input it refuses, which method it calls.

    ``pairwise``: the backend scores every pair of the words it sees, so its memory grows with the square of the
    sentence length and ``parse --max-words`` applies; False for a backend that decides its tree without a score
    matrix (``ParseScores.fixed_heads``: the fixed baselines), which parses any length.  ``refines``: the backend
    refines a given initial graph (``parse --init``, ``--iterations``)."""

    # whether the view gives the backend every token (read by ``Capabilities.whole_sentences``)
    whole_sentences: bool = False
    # whether the view gives the backend the tokens' tags (``Capabilities.reads_tags``)
    reads_tags: bool = False
    # whether plain text can feed the backend (False: CoNLL-U input with the columns it reads)
    reads_text: bool = True

    def __init__(self, *, pairwise: bool = True, refines: bool = False) -> None:
        self.pairwise = pairwise
        self.refines = refines

    def __repr__(self) -> str:
        return f"{type(self).__name__}(pairwise={self.pairwise}, refines={self.refines})"

    def hidden(self, sentence: Sentence) -> list[bool]:
        """Which tokens the backend does not see: punctuation, by the rule ``eval`` removes it by."""
        return sentence_punct_mask(sentence)

    def check(self, backend: Any, sentences: Sequence[Sentence], label: str) -> None:
        """Refuse, in one line naming ``label``, input that cannot feed the backend (nothing by default)."""

    @abstractmethod
    def score(self, backend: Any, sentences: Sequence[Sentence], hidden: Sequence[Sequence[bool]],
              init: Sequence[InitialGraph | None] | None) -> list[ParseScores]:
        """The backend's scores for ``sentences`` (each with at least one visible token), ``hidden`` their masks;
        ``init``: one initial graph per sentence for a refining view, else None."""


class VisibleWords(InputView):
    """The visible (punctuation-free) word forms, through :meth:`Backend.parse_scores`."""

    def score(self, backend, sentences, hidden, init):
        return backend.parse_scores([[w for w, h in zip(s.words, mask) if not h]
                                     for s, mask in zip(sentences, hidden)])


class TaggedWords(InputView):
    """The visible tokens with their UPOS/XPOS as Sentences (:func:`visible_sentence`), through
    :meth:`Backend.parse_sentences`: a model whose classes are tags (the DMV)."""

    reads_tags = True

    def score(self, backend, sentences, hidden, init):
        return backend.parse_sentences([visible_sentence(s, mask) for s, mask in zip(sentences, hidden)])


class WholeSentences(InputView):
    """Every token, punctuation included, with its UPOS, through :meth:`Backend.parse_sentences` with one initial
    graph per sentence when the view ``refines`` (RNGTr): nothing is hidden, and text input is refused."""

    whole_sentences = True
    reads_text = False

    def hidden(self, sentence: Sentence) -> list[bool]:
        return [False] * len(sentence.words)

    def check(self, backend, sentences, label):
        """A tag on every token: the first token without one is a located error."""
        for sentence in sentences:
            tags = sentence.upos or ["_"] * len(sentence.words)
            missing = next((k for k, tag in enumerate(tags) if tag in ("_", "")), None)
            if missing is not None:
                raise InputError(label, sentence.line, f"token {missing + 1} ({sentence.words[missing]!r}) of the "
                                                       f"sentence starting here has no UPOS ('_'); model "
                                                       f"'{backend.name}' reads UPOS from the input")

    def score(self, backend, sentences, hidden, init):
        return backend.parse_sentences(sentences, init)


def view_from_flags(whole_sentences: bool, reads_tags: bool, refines: bool, fixed_tree: bool) -> InputView:
    """The view a backend written before input views declares through its ``Capabilities`` flags (a plugin)."""
    if whole_sentences:
        return WholeSentences(pairwise=not fixed_tree, refines=refines)
    if reads_tags:
        return TaggedWords(pairwise=not fixed_tree, refines=refines)
    return VisibleWords(pairwise=not fixed_tree, refines=refines)
