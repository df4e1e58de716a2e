"""The one contract every backend implements (see ../shared/design/architecture.md).

A backend turns words into scores; decoding, punctuation handling, output formats and metrics are shared and live
outside the backends, so every backend gets every decoder and format for free.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar, Literal

import torch

from depinduce.structures.sentence import Sentence
from depinduce.errors import ModelError
from depinduce.io.initial_graphs import InitialGraph

Objective = Literal["mlm", "lm", "supervised", "em", "likelihood", "none"]
# Where ``parse --probs`` reads each word's head distribution (see :attr:`Backend.head_probs`).
HeadProbs = Literal["scores", "decoded", "none"]


@dataclass(frozen=True)
class Capabilities:
    """What a backend produces and how it learns; shown by ``depinduce models``."""

    dependency: bool
    constituency: bool
    trainable: bool
    supervised: bool
    objective: Objective = "none"
    # Reads whole sentences — every token, punctuation included, with their UPOS — through
    # :meth:`Backend.parse_sentences` instead of the punctuation-free words of :meth:`Backend.parse_scores`.
    whole_sentences: bool = False
    # Reads the visible (punctuation-free) tokens with their tags: :meth:`Backend.parse_sentences` gets them as
    # Sentences (words, UPOS, XPOS) with punctuation hidden as for :meth:`Backend.parse_scores` (the DMV).
    reads_tags: bool = False
    # Refines a given initial dependency graph (``parse --init``, ``--iterations``).
    refines: bool = False
    # Gives ``ParseScores.fixed_heads`` instead of a score matrix: memory linear in the sentence length, so
    # ``parse --max-words`` does not apply.
    fixed_tree: bool = False

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class ParseScores:
    """A backend's output for one sentence of n words (punctuation already hidden).

    ``heads``: (n+1)×(n+1) log-probabilities (or any scores), row = dependent, column = head, column 0 = ROOT;
    row 0 is unused.  ``distances``: n−1 split scores, ``distances[i]`` between words i and i+1 (larger = split
    higher).  ``heights``: n word heights (StructFormer's root choice).  Any may be None when the backend does
    not produce it; ``capabilities`` says which are present.
    """

    heads: torch.Tensor | None = None
    distances: torch.Tensor | None = None
    heights: torch.Tensor | None = None
    # (n+1)×(n+1)×L label scores of each (dependent, head) pair, and the L label names: labels are chosen after
    # the decoder has chosen the heads, so every decoder gets labelled trees.
    labels: torch.Tensor | None = None
    label_names: Sequence[str] | None = None
    # A tree the backend decides without scores (the fixed baselines): n heads, 0 = ROOT.  Every decoder would
    # return it, so the pipeline takes it as is and no (n+1)×(n+1) matrix is ever built — any length parses.
    fixed_heads: Sequence[int] | None = None
    # How the constituency tree from ``distances`` treats tied maxima: False splits at the leftmost one
    # (binary trees); True splits at all of them at once (n-ary nodes, StructFormer's authors' ``build_tree``).
    split_ties: bool = False


@dataclass(frozen=True)
class OwnDecoder:
    """A backend's own decoder: the authors' decoding convention for that backend's scores (``parse --decoder
    NAME``).  The shared decoders (mst, eisner, argmax) apply to every backend; an own decoder only to the
    backend that declares it, because it reads what that backend's scores mean (probabilities, heights, …).
    Names carry the backend's name (``udgn-tree``) so one list can show every backend's."""

    description: str
    decode: Callable[[ParseScores], list[int]]  # one sentence's scores -> n heads (1-based, 0 = ROOT)
    # False: it decodes from other fields, so the pipeline neither reads nor checks ``heads`` for it (a backend
    # that computes them on first read, the DMV, then never computes them)
    reads_heads: bool = True


def described_decoders(descriptions: Mapping[str, str],
                       decoders: Mapping[str, Callable[[ParseScores], list[int]]], *,
                       without_heads: Collection[str] = ()) -> dict[str, OwnDecoder]:
    """A backend's :attr:`Backend.own_decoders` from its light metadata (name -> description, the
    ``depinduce.decoders`` entry point that ``--help`` reads without importing the backend) and its decode
    functions; both must name the same decoders, so help lists exactly what the backend takes.
    ``without_heads``: the decoders that do not read ``ParseScores.heads`` (:attr:`OwnDecoder.reads_heads`)."""
    if set(descriptions) != set(decoders):
        raise ValueError(f"own decoders described ({', '.join(sorted(descriptions))}) and implemented "
                         f"({', '.join(sorted(decoders))}) differ")
    return {name: OwnDecoder(description, decoders[name], reads_heads=name not in without_heads)
            for name, description in descriptions.items()}


class Backend(ABC):
    """Base class of all model backends.

    Subclasses set ``name``, ``description`` and ``capabilities`` and implement :meth:`load` and
    :meth:`parse_scores`.  Trainable backends additionally implement the training hooks added by the engine.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities]
    # Trainable backends: the bundled recipe (``depinduce/recipes/NAME.yaml``) that ``train --model NAME`` uses
    # without --recipe, by device kind: ``cpu`` (sized for a CPU budget) and ``cuda`` (the paper's setting).
    default_recipes: ClassVar[dict[str, str]] = {}
    # The decoder ``parse`` uses when the user names none: a trained run's own (the ``train.decoder`` its dev
    # scores and model selection used; the bundled model's card names its own), ``mst`` otherwise.
    default_decoder: str = "mst"
    # The file ``default_decoder`` was read from (a run's config.yaml), so an error about it names that file.
    decoder_source: str | None = None
    # The authors' decoders, by name (see :class:`OwnDecoder`); ``depinduce models`` and ``parse --help`` list them.
    own_decoders: ClassVar[dict[str, OwnDecoder]] = {}
    # What ``parse --probs`` (``probs=True``) reads as each word's probability distribution over its head:
    # "scores" — ``ParseScores.heads`` are already that distribution's log-probabilities (each dependent's row over
    # ROOT and the other words sums to 1: a marginal or softmax the model computes anyway); "decoded" — the
    # backend decides its tree without any distribution (the baselines), so the decoded head has probability 1;
    # "none" — the model computes no head distribution (span models), and ``--probs`` is refused before parsing.
    # Read from the model's own output, never from a changed forward pass.
    head_probs: HeadProbs = "none"

    @classmethod
    @abstractmethod
    def load(cls, run_dir: Path | None, *, device: str = "cpu", seed: int = 0) -> "Backend":
        """Build a ready-to-parse backend: from a run directory, or untrained when ``run_dir`` is None.

        A trainable backend given no run directory raises :class:`~depinduce.errors.ModelError`.
        """

    def select_channel(self, channel: int | None) -> None:
        """Score heads with channel ``channel`` (1-based) alone instead of the average of the backend's several
        head channels (``parse --channel``); None restores the average.  A backend with several head channels
        overrides this and refuses a channel out of its range; the others have none to select."""
        raise ModelError(f"model '{self.name}' has no head channels; --channel applies only to backends "
                         "with several head channels")

    def set_iterations(self, iterations: int) -> None:
        """Refine at most ``iterations`` times (``parse --iterations``); only refining backends have iterations."""
        raise ModelError(f"model '{self.name}' does not refine a graph; --iterations applies to refining "
                         "backends (rngtr)")

    def word_head_probs(self, scores: ParseScores) -> torch.Tensor:
        """One sentence's head distribution for ``head_probs == "scores"``: n×(n+1), row i−1 = word i, column 0 =
        ROOT, each row summing to 1.  By default ``scores.heads`` exponentiated (they are its log-probabilities);
        a backend whose ROOT column is a score rather than a probability overrides this."""
        if scores.heads is None:
            raise ModelError(f"model '{self.name}' gave no head scores to read probabilities from")
        return scores.heads[1:].exp()

    def parse_sentences(self, sentences: Sequence[Sentence],
                        init: Sequence[InitialGraph | None] | None = None) -> list[ParseScores]:
        """Scores over every token of whole sentences (``capabilities.whole_sentences``), optionally refining
        one initial graph per sentence (``capabilities.refines``; None = start from no graph)."""
        raise ModelError(f"model '{self.name}' reads punctuation-free words only")

    @abstractmethod
    def parse_scores(self, sentences: Sequence[Sequence[str]]) -> list[ParseScores]:
        """Scores for a batch of sentences given as their visible (punctuation-free) original word forms.

        The backend applies its own normalisation (lower-casing, digit folding, vocabulary) internally.
        """
