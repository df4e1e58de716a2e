"""Semirings for the charts: one dynamic program answers several questions (Goodman 1999, "Semiring Parsing").

Every chart in the package (:mod:`.projective` for dependency trees, :mod:`.cky` for binary bracketings, the
DMV's and the compound PCFG's own recursions) is written once against :class:`Semiring` and run in either of:

- :data:`LOG`: ``sum`` is log-sum-exp, so a chart's total is log Z and its gradient with respect to each part's
  score is that part's posterior marginal (inside-outside by autograd);
- :data:`MAX`: ``sum`` is max, so the total is the best structure's score and its gradient is the indicator of
  that structure (``torch.max`` routes the gradient to one argument, so ties give one structure).

Values are log-space scores in both: ``times`` is ``+``, ``one`` is 0 and ``zero`` is −∞.

Extension point (k-best, entropy, sampling): a new semiring subclasses :class:`Semiring` and overrides ``sum``
(and ``times`` where it is not ``+``).  :class:`~depinduce.structures.projective.ProjectiveTrees`,
:class:`~depinduce.structures.cky.BinaryTrees` and the DMV's chart call nothing but ``zero``, ``one``, ``sum``,
``plus``, ``times`` and ``dot``, along the dimension they name, so a semiring of plain scores (sampling: a
stochastic ``sum``) plugs into them as it is.  One that keeps several numbers per item (k-best: the
k best scores; entropy: a (log Z, entropy) pair) would keep them on an extra last dimension of every chart item,
define ``times`` on such items (k-best: the k best of the k × k sums) and ``sum`` over the named dimension
only; the charts would then allocate that dimension (``one``/``zero`` items instead of the scalars 0/−∞).  The
compound PCFG's chart takes only these two: in the log semiring it contracts its rules by matrix products in
probability space, so a new semiring there needs its own rule combination.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal

import torch

SemiringName = Literal["log", "max"]


class Semiring(ABC):
    """⊕ = :meth:`sum` (over one dimension) and :meth:`plus`, ⊗ = :meth:`times`; ``zero`` and ``one`` their
    identities, as log-space scores."""

    name: ClassVar[str] = ""
    zero: ClassVar[float] = float("-inf")
    one: ClassVar[float] = 0.0

    @abstractmethod
    def sum(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        """⊕ over dimension ``dim`` (removed)."""

    def plus(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """a ⊕ b, elementwise (the two stacked and summed: one reduction, as every chart here did before)."""
        return self.sum(torch.stack((a, b)), 0)

    def times(self, a: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
        """a ⊗ b ⊗ …, elementwise with broadcasting, left to right."""
        for b in rest:
            a = a + b
        return a

    def dot(self, a: torch.Tensor, b: torch.Tensor, dim: int) -> torch.Tensor:
        """⊕ over ``dim`` of a ⊗ b: the inner loop of every chart (the split points of a span)."""
        return self.sum(self.times(a, b), dim)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _LogSumExp(torch.autograd.Function):
    """``torch.logsumexp`` whose gradient is 0, not NaN, where every term is −∞.

    Such a sum is an item no structure passes through (a left-facing span of ROOT, a forbidden arc's only use);
    torch's own backward computes exp(−∞ − (−∞)) = NaN there, and the NaN then reaches every score that shares
    an operation with the item.  Forward and backward are otherwise torch's operations in torch's order, so
    results are bit-identical to ``torch.logsumexp`` wherever that one is defined.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dim: int) -> torch.Tensor:
        out = torch.logsumexp(x, dim)
        ctx.save_for_backward(x, out)
        ctx.dim = dim % x.dim()
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        x, out = ctx.saved_tensors
        total = out.unsqueeze(ctx.dim)
        g = grad.unsqueeze(ctx.dim) * (x - total).exp()
        return g.masked_fill(torch.isneginf(total), 0.0), None


class LogSemiring(Semiring):
    """(log-sum-exp, +): totals are log partition functions, gradients are marginals."""

    name = "log"

    def sum(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        return _LogSumExp.apply(x, dim)


class MaxSemiring(Semiring):
    """(max, +): totals are best scores, gradients are the best structure's indicators."""

    name = "max"

    def sum(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        return x.max(dim).values

    def sum_with_argmax(self, x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The maximum and where it is (one of tied maxima): back-pointers for a decoder that reads the
        best structure off split tables instead of differentiating."""
        best, where = x.max(dim)
        return best, where


LOG = LogSemiring()
MAX = MaxSemiring()
_BY_NAME: dict[str, Semiring] = {"log": LOG, "max": MAX}


def as_semiring(which: Semiring | SemiringName) -> Semiring:
    """The semiring itself, or the one named ``"log"`` or ``"max"`` (the charts' string arguments)."""
    if isinstance(which, Semiring):
        return which
    try:
        return _BY_NAME[which]
    except (KeyError, TypeError):
        raise ValueError(f"unknown semiring {which!r}: expected 'log', 'max' or a Semiring") from None
