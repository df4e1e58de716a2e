"""What every distribution over structures offers, written once: the total in any semiring, and from it log Z,
the best score, the part marginals and the best structure (gradients of the total, torch-struct's approach).

A distribution (:class:`~depinduce.structures.projective.ProjectiveTrees`,
:class:`~depinduce.structures.cky.BinaryTrees`) gives its part scores (B, N+1, N+1), its lengths and its chart's
total; everything else follows here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from depinduce.structures.semirings import LOG, MAX, Semiring, SemiringName, as_semiring


class ChartDistribution(ABC):
    """A batch of sentences' structures, each scored by the sum of its parts' scores."""

    parts: torch.Tensor  # (B, N+1, N+1) part scores
    lengths: torch.Tensor  # (B,) words per sentence

    @staticmethod
    @abstractmethod
    def chart_total(parts: torch.Tensor, lengths: torch.Tensor, semiring: Semiring) -> torch.Tensor:
        """(B,): the semiring's total over each sentence's structures."""

    def partition(self, semiring: Semiring | SemiringName) -> torch.Tensor:
        """(B,): the semiring's total over each sentence's structures (log Z, or the best one's score)."""
        return self.chart_total(self.parts, self.lengths, as_semiring(semiring))

    def log_partition(self) -> torch.Tensor:
        """(B,): log Σ_structures exp(score)."""
        return self.partition(LOG)

    def max_score(self) -> torch.Tensor:
        """(B,): the best structure's score."""
        return self.partition(MAX)

    def marginals(self) -> torch.Tensor:
        """(B, N+1, N+1): each part's posterior probability; 0 where no structure has it."""
        return self._gradient(LOG)

    def argmax(self) -> torch.Tensor:
        """(B, N+1, N+1) 0/1: the parts of the best structure (one of the tied best)."""
        return self._gradient(MAX)

    def _gradient(self, semiring: Semiring) -> torch.Tensor:
        with torch.inference_mode(False), torch.enable_grad():
            leaf = self.parts.detach().clone().requires_grad_()  # clones: tensors made in inference mode
            total = self.chart_total(leaf, self.lengths.clone(), semiring)  # cannot take part in autograd
            total = torch.where(torch.isfinite(total), total, torch.zeros_like(total)).sum()
            (grad,) = torch.autograd.grad(total, [leaf])
        return grad
