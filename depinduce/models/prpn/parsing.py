"""PRPN's parsing network: syntactic distances from a convolution over the current and previous words, and the
stick-breaking gates that turn distances into soft "can word t still see word i" decisions.

The convolution is written as a window gather plus one linear map over the real positions only, so BatchNorm's
statistics never include padding and a sentence gets the same distances alone or in a padded batch (off the CPU's
route: over every position, BatchNorm's statistics masked, ``layers/masked_norm.py``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from depinduce.models.layers.cumprod import cumprod_last
from depinduce.models.layers.dropout import apply_dropout
from depinduce.models.layers.kernels import plain_ops
from depinduce.models.layers.masked_norm import masked_batch_norm


class ParsingNetwork(nn.Module):
    """Conv(kernel lookback+1) → BatchNorm → ReLU → two 1×1 heads (each on half the channels) → sigmoid.

    The final squashing is a sigmoid, as in the authors' code and docs/models-reference.md; only the paper's eq. 8
    writes
    a ReLU (a ReLU head whose pre-activations start negative everywhere would never get a gradient again, and
    bounded distances keep the resolution r meaningful).

    Initialised as the authors' code under torch 0.3 (``authors_init``): BatchNorm's scale uniform in [0, 1), and
    the two heads (one grouped 1×1 convolution there, whose bound torch 0.3 took from all H input channels)
    uniform ±1/√H; otherwise torch's defaults (scale 1, heads ±1/√(H/2)).

    For position t the output is d_t, the distance between tokens t−1 and t, and d̂_(t+1), a guess of the next
    distance that the predict network uses before it has seen token t+1.
    """

    def __init__(self, emb_size: int, hidden_size: int, lookback: int, dropout: float, *,
                 authors_init: bool = True) -> None:
        super().__init__()
        self.lookback = lookback
        self.dropout = dropout
        self.window = nn.Linear(emb_size * (lookback + 1), hidden_size)
        self.norm = nn.BatchNorm1d(hidden_size)
        half = hidden_size // 2
        self.half = half
        self.distance = nn.Linear(half, 1)
        self.next_distance = nn.Linear(hidden_size - half, 1)
        if authors_init:
            nn.init.uniform_(self.norm.weight, 0.0, 1.0)
            bound = 1.0 / math.sqrt(hidden_size)
            for head in (self.distance, self.next_distance):
                nn.init.uniform_(head.weight, -bound, bound)
                nn.init.uniform_(head.bias, -bound, bound)

    def forward(self, embedded: torch.Tensor, rows: torch.Tensor, history: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Distances (B, T) and next-distance guesses (B, T) for ``embedded`` (B, T, E); ``rows`` (B, T) marks
        the positions computed (others are 0).  ``history`` (B, lookback, E) holds the embeddings before the
        first position (continuous text); None means the sequence starts here (zero vectors, as in the paper).
        """
        batch, length, width = embedded.shape
        if history is None:
            history = embedded.new_zeros(batch, self.lookback, width)
        padded = apply_dropout(torch.cat([history, embedded], dim=1), self.dropout, self.training)  # (B, L+T, E)
        # windows[b, t] = tokens t−L .. t, oldest first: (B, T, E, L+1) → (B, T, (L+1)·E) in time-major order
        windows = padded.unfold(1, self.lookback + 1, 1).transpose(2, 3).reshape(batch, length, -1)
        if plain_ops(embedded):  # every position, BatchNorm over the marked ones: no host read, a static shape
            hidden = F.relu(masked_batch_norm(self.window(windows), rows, self.norm))
            d, d_next = self._heads(apply_dropout(hidden, self.dropout, self.training))
            zero = d.new_zeros(())
            return torch.where(rows, d, zero), torch.where(rows, d_next, zero)
        hidden = F.relu(self.norm(self.window(windows[rows])))
        d, d_next = self._heads(apply_dropout(hidden, self.dropout, self.training))
        distance = embedded.new_zeros(batch, length)
        next_distance = embedded.new_zeros(batch, length)
        return distance.masked_scatter(rows, d), next_distance.masked_scatter(rows, d_next)

    def _heads(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        d = torch.sigmoid(self.distance(hidden[..., : self.half])).squeeze(-1)
        d_next = torch.sigmoid(self.next_distance(hidden[..., self.half :])).squeeze(-1)
        return d, d_next


def stick_breaking_gates(query: torch.Tensor, distances: torch.Tensor, previous: torch.Tensor, *,
                         resolution: float, hard: bool) -> torch.Tensor:
    """Gates (B, T, S) over S memory slots: slot k at position t holds the state of token t−1−k, and its gate is
    Π_(j=0..k) α(query_t, d_(t−j)) — the expected value of "no gap between that token and now is wider than
    the query" under the paper's stick-breaking process (its eq. 5).

    ``query`` (B, T) is d_t for the reading network and d̂_(t+1) for the predict network; ``distances`` (B, T)
    are d_t; ``previous`` (B, S) are the S distances before the first position, oldest first (+inf where the
    sequence starts: α(·, +inf) = 0 closes every slot before it).
    """
    slots = previous.shape[1]
    extended = torch.cat([previous, distances], dim=1)  # (B, S + T)
    # hat[b, t, k] = d_(t−k): windows ending at position t, newest first
    hat = extended.unfold(1, slots, 1)[:, 1:].flip(-1)
    diff = (query.unsqueeze(-1) - hat) / resolution
    if hard:
        alpha = (1.0 + diff).clamp(0.0, 1.0)
    else:
        alpha = torch.sigmoid(10.0 * diff + 5.0)
    return cumprod_last(alpha)
