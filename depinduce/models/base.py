"""The one contract every backend implements (see docs/architecture.md).

A backend turns words into scores; decoding, punctuation handling, output formats and metrics are shared and live
outside the backends, so every backend gets every decoder and format for free.  What a backend is, it declares in
types, not flags: the words it reads by its ``input_view`` (:mod:`depinduce.models.views`), the trees it gives by
``induces``, and how it learns by the contract class of its objective (:mod:`depinduce.models.contracts`);
:class:`Capabilities` is derived from the three, for ``depinduce models`` (docs/writing-a-backend.md).
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
from depinduce.models.scores import ParseScores
from depinduce.models.views import InputView, VisibleWords, view_from_flags

Objective = Literal["mlm", "lm", "supervised", "em", "likelihood", "none"]
# Where ``parse --probs`` reads each word's head distribution (see :attr:`Backend.head_probs`).
HeadProbs = Literal["scores", "decoded", "none"]


@dataclass(frozen=True)
class Induces:
    """Which trees a backend gives: heads (``dependency``), split distances or spans (``constituency``), or both."""

    dependency: bool
    constituency: bool


@dataclass(frozen=True)
class Capabilities:
    """What a backend produces and how it learns; shown by ``depinduce models``.

    Derived from the class (:meth:`Backend.__init_subclass__`): ``dependency``/``constituency`` from
    :attr:`Backend.induces`, ``objective``/``trainable``/``supervised`` from its objective contract, the rest from
    its :attr:`Backend.input_view`.  A class written before input views may still declare it; its view then
    follows from these flags."""

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
    # False: its output is not always a tree (an argmax): ``parse`` then does not use it unless asked by name
    # (``--decoder``), even when it is the run's ``train.decoder`` (see :attr:`Backend.default_decoder`)
    gives_trees: bool = True
    # The head distribution this decoder reads, when it is not the backend's (:meth:`Backend.word_head_probs`):
    # one sentence's scores -> n×(n+1), column 0 = ROOT, rows summing to 1.  ``parse --probs`` prints it with
    # this decoder, so the printed rows are what the heads were chosen by (an argmax decoder takes each row's
    # argmax of it); e.g. the authors' decoders that give ROOT probability 0, or decide the root by height.
    probs: Callable[[ParseScores], torch.Tensor] | None = None


def described_decoders(descriptions: Mapping[str, str],
                       decoders: Mapping[str, Callable[[ParseScores], list[int]]], *,
                       without_heads: Collection[str] = (), not_trees: Collection[str] = (),
                       probs: Mapping[str, Callable[[ParseScores], torch.Tensor]] | None = None,
                       ) -> dict[str, OwnDecoder]:
    """A backend's :attr:`Backend.own_decoders` from its light metadata (name -> description, the
    ``depinduce.decoders`` entry point that ``--help`` reads without importing the backend) and its decode
    functions; both must name the same decoders, so help lists exactly what the backend takes.
    ``without_heads``: the decoders that do not read ``ParseScores.heads`` (:attr:`OwnDecoder.reads_heads`);
    ``not_trees``: those whose output is not always a tree (:attr:`OwnDecoder.gives_trees`); ``probs``: the
    head distribution of those that read another than the backend's (:attr:`OwnDecoder.probs`)."""
    if set(descriptions) != set(decoders):
        raise ValueError(f"own decoders described ({', '.join(sorted(descriptions))}) and implemented "
                         f"({', '.join(sorted(decoders))}) differ")
    probs = dict(probs or {})
    if unknown := set(probs) - set(decoders):
        raise ValueError(f"head distributions given for unknown decoders: {', '.join(sorted(unknown))}")
    return {name: OwnDecoder(description, decoders[name], reads_heads=name not in without_heads,
                             gives_trees=name not in not_trees, probs=probs.get(name))
            for name, description in descriptions.items()}


def normalised_rows(probs: torch.Tensor) -> torch.Tensor:
    """Non-negative head weights n×(n+1) (column 0 = ROOT) -> rows summing to 1, in float64; a row without any
    weight (a one-word sentence, whose only candidate is ROOT) becomes ROOT = 1."""
    rows = probs.detach().to(torch.float64).clamp_min(0.0)
    total = rows.sum(dim=-1, keepdim=True)
    empty = total.squeeze(-1) <= 0
    rows = rows / torch.where(total > 0, total, torch.ones_like(total))
    if bool(empty.any()):
        rows[empty] = 0.0
        rows[empty, 0] = 1.0
    return rows


def row_softmax(log_scores: torch.Tensor) -> torch.Tensor:
    """Log head scores n×(n+1) -> each row's softmax in float64 (a row of −inf only: ROOT = 1).

    Why a softmax of the scores is the distribution their decoders use: ``mst``, ``eisner`` and ``argmax`` add
    one score per word, so adding a constant to a word's whole row changes no tree; exp of a row over its sum
    is the one member of that class that is a distribution, and its argmax is the row's argmax."""
    scores = log_scores.detach().to(torch.float64)
    finite = torch.isfinite(scores).any(dim=-1, keepdim=True)
    shifted = scores - torch.where(finite, scores.amax(dim=-1, keepdim=True), torch.zeros_like(scores[..., :1]))
    return normalised_rows(shifted.exp())


class Backend(ABC):
    """Base class of all model backends.

    Subclasses set ``name``, ``description`` and ``induces`` (and ``input_view`` when they read other than the
    visible words) and implement :meth:`load` and :meth:`parse_scores`.  Trainable backends subclass the contract
    of their objective instead (:mod:`depinduce.models.contracts`), whose abstract methods are its hooks.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    # Which trees the backend gives (``parse --format`` checks it: heads for conllu, a tree for brackets).
    induces: ClassVar[Induces] = Induces(dependency=True, constituency=False)
    # What the parse pipeline gives the backend and calls on it (see :mod:`depinduce.models.views`).
    input_view: ClassVar[InputView] = VisibleWords()
    # The training objective, set by the contract class the backend subclasses (:mod:`depinduce.models.contracts`).
    objective: ClassVar[Objective] = "none"
    # Derived from the three above (see :class:`Capabilities`); ``depinduce models`` shows it.
    capabilities: ClassVar[Capabilities]
    _declares_capabilities: ClassVar[bool] = False  # the class (or the one it extends) declares them itself
    # Trainable backends: the bundled recipe (``depinduce/recipes/NAME.yaml``) that ``train --model NAME`` uses
    # without --recipe, by device kind: ``cpu`` (sized for a CPU budget) and ``cuda`` (the paper's setting).
    default_recipes: ClassVar[dict[str, str]] = {}
    # A trained run's own decoder: the ``train.decoder`` its dev scores and model selection used (the bundled
    # model's card names its own), ``mst`` otherwise.  ``parse`` uses it when the user names none, unless it does
    # not always give a tree (an argmax): then ``parse`` writes ``mst`` trees and says how to ask for this one.
    default_decoder: str = "mst"
    # The file ``default_decoder`` was read from (a run's config.yaml), so an error about it names that file.
    decoder_source: str | None = None
    # The authors' decoders, by name (see :class:`OwnDecoder`); ``depinduce models`` and ``parse --help`` list them.
    own_decoders: ClassVar[dict[str, OwnDecoder]] = {}
    # The backend's own form of a shared decoder (``mst``, ``eisner``, ``argmax``), run in its place for this
    # backend's scores: StructFormer's ``argmax`` takes the highest word as the root, as its paper does.
    shared_decoder_forms: ClassVar[dict[str, OwnDecoder]] = {}
    # What ``parse --probs`` (``probs=True``) reads as each word's probability distribution over its head:
    # "scores" — each row of ``ParseScores.heads``, the log scores the shared decoders read, made a distribution
    # (:meth:`word_head_probs`: a marginal or softmax the model computes anyway, ROOT included; a decoder that
    # reads another distribution names it, :attr:`OwnDecoder.probs`); "decoded" — the
    # backend decides its tree without any distribution (the baselines), so the decoded head has probability 1;
    # "none" — the model computes no head distribution (span models), and ``--probs`` is refused before parsing.
    # Read from the model's own output, never from a changed forward pass.
    head_probs: HeadProbs = "none"

    def __init_subclass__(cls, **kwargs: object) -> None:
        """Derive :attr:`capabilities` from the class; a class that declares them (written before input views)
        gets the input view they describe, unless it declares one too."""
        super().__init_subclass__(**kwargs)
        declared = cls.__dict__.get("capabilities")
        if isinstance(declared, Capabilities):
            cls._declares_capabilities = True
            if "input_view" not in cls.__dict__:
                cls.input_view = view_from_flags(declared.whole_sentences, declared.reads_tags, declared.refines,
                                                 declared.fixed_tree)
            if cls.objective not in ("none", declared.objective):
                raise TypeError(f"{cls.__name__}: capabilities name objective '{declared.objective}', but the class "
                                f"subclasses the contract of objective '{cls.objective}'")
            return
        if cls._declares_capabilities and not {"induces", "input_view"} & set(cls.__dict__):
            return  # a subclass of a class that declares them, changing nothing they describe: they hold
        cls._declares_capabilities = False
        view, objective = cls.input_view, cls.objective
        cls.capabilities = Capabilities(
            dependency=cls.induces.dependency, constituency=cls.induces.constituency, trainable=objective != "none",
            supervised=objective == "supervised", objective=objective, whole_sentences=view.whole_sentences,
            reads_tags=view.reads_tags, refines=view.refines, fixed_tree=not view.pairwise)

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
        """One sentence's head distribution for ``head_probs == "scores"``, as the shared decoders (``mst``,
        ``eisner``, ``argmax``) read it: n×(n+1) float64, row i−1 = word i, column 0 = ROOT, each row summing to
        1.  It is each row of ``scores.heads`` made a distribution (:func:`row_softmax`): their exp where they
        are log-probabilities already, and where column 0 is a root score on another scale (the Probabilistic
        Transformer without its ROOT node) that score normalised with the row — the decoders choose the same
        heads from either.  A decoder that reads another distribution names it (:attr:`OwnDecoder.probs`)."""
        if scores.heads is None:
            raise ModelError(f"model '{self.name}' gave no head scores to read probabilities from")
        return row_softmax(scores.heads[1:])

    def parse_sentences(self, sentences: Sequence[Sentence],
                        init: Sequence[InitialGraph | None] | None = None) -> list[ParseScores]:
        """Scores for the sentences the backend's :attr:`input_view` gives it: the visible tokens with their tags
        (:class:`~depinduce.models.views.TaggedWords`), or every token with its UPOS, optionally refining one
        initial graph per sentence (:class:`~depinduce.models.views.WholeSentences`; None = start from no graph)."""
        raise ModelError(f"model '{self.name}' reads punctuation-free words only")

    @abstractmethod
    def parse_scores(self, sentences: Sequence[Sequence[str]]) -> list[ParseScores]:
        """Scores for a batch of sentences given as their visible (punctuation-free) original word forms.

        The backend applies its own normalisation (lower-casing, digit folding, vocabulary) internally.
        """
