"""UDGN's head-selective parser (paper section 3.1, a simplified DENSE) and its undirected dependency mask (3.2).

Own word embedding → dropout → BiLSTM → dropout → Linear(2P → 2P) split into a child and a parent half →
e[i, j] = child_i · parent_j / √P → p[i, ·] = softmax over the sentence's real words.

As in the authors' code the softmax does not exclude the diagonal: the mass p[i, i] a word puts on itself is
the share of its distribution that is no edge of the graph, which the backend scores as its root probability
(see ``model.py``).  Padding columns are excluded and padding rows are zero.

The BiLSTM runs each direction over the real words of each sentence only, as a packed sequence would, so a
sentence's distribution does not depend on its batch-mates (see :class:`BiLSTM` for how it avoids packing).
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.utils.checkpoint import checkpoint

from depinduce.errors import UsageError
from depinduce.models.layers.dropout import apply_dropout
from depinduce.models.layers.kernels import on_cpu_route, position_linear
from depinduce.models.layers.memory import should_recompute

# oneDNN's training workspace per token, layer and hidden unit (both directions): ~190 MB per layer measured for
# 4,096 tokens at 256 units, i.e. about 45 floats; rounded up.
_WORKSPACE_FLOATS_PER_UNIT = 48

LSTM_ROUTE_VARIABLE = "DEPINDUCE_LSTM_ROUTE"

# Logit of a padding column: finite (an empty row stays NaN-free), and exp() of it underflows to exactly zero.
_PADDING_LOGIT = -1e9


def reverse_within_lengths(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """(B, width) gather index that reverses each row's first ``lengths[b]`` positions and keeps the padding in
    place; applying it twice is the identity."""
    t = torch.arange(width, device=lengths.device)[None, :]
    last = lengths[:, None] - 1
    return torch.where(t <= last, last - t, t)


def reversal_rows(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """:func:`reverse_within_lengths` as indices into the (B·width) rows of a flattened (B, width, C) batch."""
    index = reverse_within_lengths(lengths, width)
    return (index + width * torch.arange(index.size(0), device=index.device)[:, None]).flatten()


class _SwapRows(torch.autograd.Function):
    """Rows of a (N, C) tensor permuted by an involution (a permutation that is its own inverse), forward and
    backward alike by ``index_select``.

    Why: the right-to-left direction reverses each sentence twice per layer.  As ``gather`` over the time axis,
    with ``scatter_add`` in backward, that took 3–4 ms per (80, 26, 512) batch on a Zen 4 (2 threads, forward and
    backward); copying whole rows takes 0.1–0.4 ms.  A permutation's values and gradients are copies either way,
    so the numbers are the same bit for bit."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(rows)
        return x.index_select(0, rows)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (rows,) = ctx.saved_tensors
        return grad.index_select(0, rows), None


def swap_time(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``x`` (B, T, C) with each sentence's time axis permuted by ``rows`` (:func:`reversal_rows`: an involution)."""
    return _SwapRows.apply(x.reshape(-1, x.size(-1)), rows).view(x.shape)


def _packs(x: torch.Tensor) -> bool:
    """Whether :class:`BiLSTM` runs ``x`` as a packed sequence (see there; never while ``torch.compile``
    traces)."""
    if torch.compiler.is_compiling():
        return False
    route = os.environ.get(LSTM_ROUTE_VARIABLE, "").strip().lower()
    if route not in ("", "packed", "per-direction"):
        raise UsageError(f"{LSTM_ROUTE_VARIABLE}={route!r}: expected packed or per-direction "
                         "(or unset: packed on CUDA, per direction on the CPU)")
    return route == "packed" or (not route and not on_cpu_route(x))


class BiLSTM(nn.Module):
    """A multi-layer bidirectional LSTM over the real words of each sentence, dropout between layers.

    The parameters are an ordinary ``nn.LSTM(bidirectional=True)``.  On CPU each layer and direction is run as
    its own unidirectional LSTM over an unpacked batch, the right-to-left direction over each sentence reversed
    within its length: outputs at real positions are exactly those of the packed sequence, but torch runs
    unpacked CPU LSTMs through oneDNN, about twice as fast as its packed-sequence loop.  So it is on every
    device while ``torch.compile`` traces (``train.compile``): packing reads the lengths on the host and has a
    shape the data decide, which would break the compiled graph (on CUDA, cuDNN then copies each layer's and
    direction's weights into its own buffer per call, and torch says once that they are not one contiguous
    chunk).  Otherwise, on CUDA, the packed sequence goes through ``nn.LSTM`` itself, by default: packing and
    unpacking cost a few hundred ops a step and two host reads, one direction at a time costs cuDNN its weight
    copies, and which is faster on a GPU has not been measured yet; ``DEPINDUCE_LSTM_ROUTE=per-direction`` (or
    ``packed``) chooses for every device, so that ``scripts/gpu_check.sh`` measures both.  Outputs at padding
    positions are unspecified.
    """

    def __init__(self, input_size: int, hidden_size: int, n_layers: int, dropout: float,
                 recompute: bool | str = "auto") -> None:
        super().__init__()
        self.dropout = dropout
        # Training on CPU may keep each layer's input only and rerun the layer in backward: oneDNN's LSTM keeps
        # ~190 MB of workspace per layer for a 4,096-token batch at 256 units, for one more LSTM forward per
        # layer.  ``auto``: only when memory would otherwise run short (layers/memory.py).
        self.recompute = recompute
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=n_layers, bidirectional=True, batch_first=True,
                            dropout=dropout if n_layers > 1 else 0.0)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T, 2·hidden) for ``x`` (B, T, input) and the (B, T) real-word ``mask`` (a prefix of each row)."""
        lengths = mask.sum(dim=-1)
        if _packs(x):
            return self._packed(x, lengths)
        reverse = reversal_rows(lengths, x.size(1))
        recompute = torch.is_grad_enabled() and (on_cpu_route(x) or self.recompute is True) and should_recompute(
            self.recompute, x.size(0) * x.size(1) * _WORKSPACE_FLOATS_PER_UNIT * self.lstm.hidden_size
            * x.element_size() * self.lstm.num_layers)
        zeros = x.new_zeros((1, x.size(0), self.lstm.hidden_size))  # every layer's and direction's h0 and c0
        h = x
        for layer in range(self.lstm.num_layers):
            if layer > 0:
                h = apply_dropout(h, self.dropout, self.training)
            if recompute:
                h = checkpoint(self._layer, h, reverse, zeros, layer, use_reentrant=False)
            else:
                h = self._layer(h, reverse, zeros, layer)
        return h

    def _layer(self, h: torch.Tensor, reverse: torch.Tensor, zeros: torch.Tensor, layer: int) -> torch.Tensor:
        """Both directions of one layer, concatenated (B, T, 2·hidden)."""
        left_to_right = self._direction(h, zeros, layer, "")
        right_to_left = self._direction(swap_time(h, reverse), zeros, layer, "_reverse")
        return torch.cat([left_to_right, swap_time(right_to_left, reverse)], dim=-1)

    def _direction(self, x: torch.Tensor, zeros: torch.Tensor, layer: int, suffix: str) -> torch.Tensor:
        """One layer and direction (``suffix`` "" or "_reverse") of the LSTM over (B, T, input) ``x``."""
        lstm = self.lstm
        kinds = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        params = [getattr(lstm, f"{kind}_l{layer}{suffix}") for kind in kinds]
        # (input, (h0, c0), params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
        return torch.lstm(x, (zeros, zeros), params, True, 1, 0.0, self.training, False, True)[0]

    def _packed(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
        return pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=x.size(1))[0]


class HeadSelectiveParser(nn.Module):
    """Words → head logits e[i, j] (paper equations 1–4) and the head distribution p (equation 5)."""

    def __init__(self, vocab_size: int, embedding_size: int, hidden_size: int, n_layers: int, dropout: float,
                 recompute: bool | str = "auto", init: str = "authors") -> None:
        super().__init__()
        self.dropout = dropout
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(vocab_size, embedding_size)
        self.encoder = BiLSTM(embedding_size, hidden_size, n_layers, dropout, recompute)
        # [child | parent] halves of one projection of the BiLSTM state.
        self.project = nn.Linear(2 * hidden_size, 2 * hidden_size)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        if init == "authors":  # theirs; ``depinduce`` keeps nn.Linear's default (weight and bias ±1/√(2P))
            nn.init.xavier_uniform_(self.project.weight)
            nn.init.zeros_(self.project.bias)

    def logits(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T, T) head logits, row = dependent, column = candidate head; padding columns are −1e9."""
        x = apply_dropout(self.embedding(tokens), self.dropout, self.training)
        h = apply_dropout(self.encoder(x, mask), self.dropout, self.training)
        projected = position_linear(h, self.project.weight, self.project.bias)
        child, parent = projected.split(self.hidden_size, dim=-1)
        # float32 under autocast too (precision: bf16): the head distribution is the model's output; a float64
        # model keeps float64 (the authors' function to round-off, scripts/check_authors.py)
        logits = torch.bmm(child, parent.transpose(1, 2))
        logits = logits.to(torch.promote_types(logits.dtype, torch.float32)).mul_(self.hidden_size**-0.5)
        return logits.masked_fill(~mask[:, None, :], _PADDING_LOGIT)

    def head_distribution(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """p (B, T, T): each real row sums to one over the sentence's real words (itself included); padding rows
        and columns are zero."""
        return self.logits(tokens, mask).softmax(dim=-1) * mask[:, :, None]


def undirected_mask(p: torch.Tensor) -> torch.Tensor:
    """m = head + headᵀ − head ⊙ headᵀ with head = p without its diagonal (paper equation 6): the probability
    that i depends on j or j on i, treating the two as independent events; symmetric, zero diagonal, in [0, 1]."""
    head = p * (1.0 - torch.eye(p.size(-1), dtype=p.dtype, device=p.device))
    child = head.transpose(1, 2)
    return head + child - head * child
