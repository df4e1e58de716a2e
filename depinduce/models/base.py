"""The one contract every backend implements (see ../shared/design/architecture.md).

A backend turns words into scores; decoding, punctuation handling, output formats and metrics are shared and live
outside the backends, so every backend gets every decoder and format for free.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar, Literal

import torch

from depinduce.errors import DepinduceError

Objective = Literal["mlm", "lm", "supervised", "none"]


@dataclass(frozen=True)
class Capabilities:
    """What a backend produces and how it learns; shown by ``depinduce models``."""

    dependency: bool
    constituency: bool
    trainable: bool
    supervised: bool
    objective: Objective = "none"

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


class Backend(ABC):
    """Base class of all model backends.

    Subclasses set ``name``, ``description`` and ``capabilities`` and implement :meth:`load` and
    :meth:`parse_scores`.  Trainable backends additionally implement the training hooks added by the engine.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities]

    @classmethod
    @abstractmethod
    def load(cls, run_dir: Path | None, *, device: str = "cpu", seed: int = 0) -> "Backend":
        """Build a ready-to-parse backend: from a run directory, or untrained when ``run_dir`` is None.

        A trainable backend given no run directory raises :class:`~depinduce.errors.DepinduceError`.
        """

    def select_channel(self, channel: int | None) -> None:
        """Score heads with channel ``channel`` (1-based) alone instead of the average of the backend's several
        head channels (``parse --channel``); None restores the average.  A backend with several head channels
        overrides this and refuses a channel out of its range; the others have none to select."""
        raise DepinduceError(f"model '{self.name}' has no head channels; --channel applies only to backends "
                             "with several head channels")

    @abstractmethod
    def parse_scores(self, sentences: Sequence[Sequence[str]]) -> list[ParseScores]:
        """Scores for a batch of sentences given as their visible (punctuation-free) original word forms.

        The backend applies its own normalisation (lower-casing, digit folding, vocabulary) internally.
        """
