"""One contract class per training objective: what a trainable backend subclasses, and what it must implement.

Each class below is a :class:`~depinduce.models.neural.NeuralBackend` whose abstract methods are exactly the hooks
its objective in :mod:`depinduce.training.objectives` (or EM, :mod:`depinduce.training.em`) calls, so Python
refuses to instantiate a backend that lacks one, and a type checker names it.  Every objective also calls
``regularizer()``, which :class:`NeuralBackend` gives (None: nothing to add).  The class sets the backend's
``objective`` (and so ``Capabilities.objective``, ``trainable`` and ``supervised``): a backend states how it learns
by what it subclasses, not by a string.

=====================  ============  =========================================================================
contract               objective     hooks
=====================  ============  =========================================================================
MaskedLMBackend        ``mlm``       ``encode``, ``output_logits`` (``encode_masked`` optional)
NextWordLMBackend      ``lm``        ``lm_hidden``, ``output_logits``
StreamingLMBackend     ``lm``        ``lm_stream``, ``output_logits`` (``train.lm_mode: continuous``)
RefinerBackend         ``supervised`` ``arc_label_passes`` (``updates_per_pass``, ``max_passes`` optional)
LikelihoodBackend      ``likelihood`` ``neg_elbo``
EMBackend              ``em``        ``build_vocab``, ``tag_column``, ``classes``, ``tables``,
                                     ``expected_counts``, ``initial_counts``, ``set_counts``
=====================  ============  =========================================================================

A language model whose output layer is one linear map also lists
:class:`~depinduce.models.neural.LinearOutputLayer` first, which gives ``output_logits``.  As with
:mod:`collections.abc`, a class that has every hook of a contract counts as one (``isinstance``) even without
subclassing it — a stand-in in a test, or a plugin written before the contracts — but only subclassing sets the
objective.  See docs/writing-a-backend.md.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from depinduce.errors import ModelError
from depinduce.models.neural import NeuralBackend

if TYPE_CHECKING:
    from depinduce.data.normalize import Normalization
    from depinduce.data.vocab import Vocab
    from depinduce.structures.sentence import Sentence


class ObjectiveContract(NeuralBackend):
    """The base of the contract classes: ``hooks`` are the methods the objective calls (its abstract methods
    and the shared ``regularizer``)."""

    hooks: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A backend learns by one objective: subclassing the contracts of two is a mistake, said at once."""
        objectives = {base.objective for base in cls.__mro__[1:]  # the contracts: this module's subclasses
                      if base.__module__ == __name__ and base is not ObjectiveContract}
        if len(objectives) > 1:
            raise TypeError(f"{cls.__name__} subclasses the contracts of objectives {', '.join(sorted(objectives))}; "
                            "a backend has one objective")
        super().__init_subclass__(**kwargs)

    @classmethod
    def __subclasshook__(cls, other: type) -> Any:
        # a contract itself (not a backend that subclasses one) counts a class with all its hooks as one of its own
        if cls not in CONTRACTS or not all(callable(getattr(other, hook, None)) for hook in cls.hooks):
            return NotImplemented
        return True


class MaskedLMBackend(ObjectiveContract):
    """Masked-LM objective (StructFormer, UDGN, Probabilistic Transformer): the engine masks tokens, the backend
    encodes the masked input and scores the masked positions only."""

    objective = "mlm"
    hooks = ("encode", "output_logits", "regularizer")

    @abstractmethod
    def encode(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Hidden states (B, T, H) for input ``tokens`` (B, T) in which masked positions hold ``<mask>``;
        ``mask`` (B, T) is true at real (non-padding) positions."""

    def encode_masked(self, tokens: torch.Tensor, mask: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        """The hidden states (N, H) at the ``masked`` positions (boolean B × T), in ``hidden[masked]`` order: what
        the masked-LM objective scores.  A backend whose last layer works position by position may override it
        to do that work at those positions only; the numbers must stay ``encode(tokens, mask)[masked]``'s."""
        return self.encode(tokens, mask)[masked]

    @abstractmethod
    def output_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits (N, V) for the hidden states (N, H) of the masked positions only."""


class NextWordLMBackend(ObjectiveContract):
    """Next-word language modelling of each sentence on its own (PRPN's parsing mode)."""

    objective = "lm"
    hooks = ("lm_hidden", "output_logits", "regularizer")

    @abstractmethod
    def lm_hidden(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T+1, H): position t has read a sentence boundary (index ``len(vocab)``) and the words before t and
        predicts word t; position n predicts the closing boundary."""

    @abstractmethod
    def output_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits (N, V+1) over the vocabulary and the boundary for hidden states (N, H)."""


class StreamingLMBackend(ObjectiveContract):
    """Next-word language modelling of continuous text with truncated backpropagation (PRPN's LM mode)."""

    objective = "lm"
    hooks = ("lm_stream", "output_logits", "regularizer")

    @abstractmethod
    def lm_stream(self, tokens: torch.Tensor, state: list[torch.Tensor] | None
                  ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """(hidden (B, T, H), state) for a chunk of ``bptt`` tokens of B parallel streams; ``state`` (None at the
        start) is what the previous chunk returned, carried without gradients."""

    @abstractmethod
    def output_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits (N, V+1) over the vocabulary and the boundary for hidden states (N, H)."""


class RefinerBackend(ObjectiveContract):
    """Supervised heads and labels from gold trees, at every refinement pass (RNGTr/SynTr).  Optional: a true
    ``updates_per_pass`` makes one optimiser update per pass, ``max_passes`` bounding them."""

    objective = "supervised"
    hooks = ("arc_label_passes", "regularizer")

    @abstractmethod
    def arc_label_passes(self, tokens: torch.Tensor, mask: torch.Tensor, heads: torch.Tensor, *,
                         upos: torch.Tensor, init_heads: torch.Tensor | None = None,
                         init_labels: torch.Tensor | None = None,
                         **pieces: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]:
        """Per refinement pass: (arc (b, T, T+1), label logits (b, T, L) at the gold heads, the b batch rows still
        refining as indices, or None for all, or — a pass over the whole batch, b = B — a (B,) boolean mask of the
        rows still refining); arc column 0 = ROOT."""


class LikelihoodBackend(ObjectiveContract):
    """Maximum likelihood of a generative model of sentences (the compound / neural PCFG)."""

    objective = "likelihood"
    hooks = ("neg_elbo", "regularizer")

    @abstractmethod
    def neg_elbo(self, tokens: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(per-sentence negative ELBO (B,), words each counts (B,)): 0 words for a sentence the model cannot
        generate, which is left out of the loss."""


class EMBackend(ObjectiveContract):
    """Batch EM (the DMV): ``depinduce train`` runs :class:`depinduce.training.em.EMLoop`, not gradient
    steps.  ``build_vocab`` and ``tag_column`` are read on the class, before any model exists."""

    objective = "em"
    hooks = ("build_vocab", "tag_column", "classes", "tables", "expected_counts", "initial_counts", "set_counts")

    @classmethod
    @abstractmethod
    def build_vocab(cls, sentences: Sequence[Sentence], config: Any, normalization: Normalization) -> Vocab:
        """The class inventory (a Vocab) of the token view, from the training sentences."""

    @staticmethod
    @abstractmethod
    def tag_column(config: Any) -> str | None:
        """The CoNLL-U column the token view reads (``upos``/``xpos``), None for words."""

    @abstractmethod
    def classes(self, sentences: Sequence[Sentence]) -> list[list[int]]:
        """Class indices of each sentence's tokens."""

    @abstractmethod
    def tables(self) -> dict[str, torch.Tensor]:
        """The model's parameter tables by name (what the counts of :meth:`expected_counts` are for)."""

    @abstractmethod
    def expected_counts(self, rows: Sequence[Sequence[int]]) -> tuple[float, dict[str, torch.Tensor]]:
        """E-step: Σ log P(sentence) over ``rows`` and the posterior expected count of every event, by table."""

    @abstractmethod
    def initial_counts(self, rows: Sequence[Sequence[int]]) -> dict[str, torch.Tensor]:
        """The pseudo-counts of EM's first M-step (an initialiser)."""

    @abstractmethod
    def set_counts(self, counts: dict[str, torch.Tensor]) -> None:
        """M-step: the tables from (smoothed) counts."""


CONTRACTS: tuple[type[ObjectiveContract], ...] = (MaskedLMBackend, NextWordLMBackend, StreamingLMBackend,
                                                  RefinerBackend, LikelihoodBackend, EMBackend)


def require_contract(model: Any, contract: type[ObjectiveContract]) -> None:
    """A one-line error unless ``model`` is a ``contract`` (by subclassing it, or by having all its hooks)."""
    if isinstance(model, contract):
        return
    missing = [hook for hook in contract.hooks if not callable(getattr(model, hook, None))]
    lacks = f"lacks {', '.join(missing)}()" if missing else f"is not a {contract.__name__}"
    raise ModelError(f"model '{getattr(model, 'name', type(model).__name__)}' declares objective "
                     f"'{contract.objective}' but {lacks}")
