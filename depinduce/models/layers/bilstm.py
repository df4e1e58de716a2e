"""A bidirectional LSTM over the real words of each sentence, without packing where packing costs more.

Used by UDGN's parser (3 layers, dropout between them) and the compound PCFG's inference network (1 layer).
The parameters are an ordinary ``nn.LSTM(bidirectional=True, batch_first=True)``, so checkpoints keep its names.

On the CPU each layer and direction runs as its own unidirectional LSTM over the unpacked batch, the
right-to-left direction over each sentence reversed within its length: the outputs at real positions are those
of the packed sequence (to float rounding), but torch runs unpacked CPU LSTMs through oneDNN, about twice as fast
as its loop over a packed sequence, and issues a few ops per layer where packing and unpacking issue a few per
distinct length and time step.  It is the route on every device by default: on CUDA, packing reads the lengths
on the host (the step waits for the device) and issues a few hundred ops a step where one direction at a time
issues far fewer (3,258 against 3,081 aten events a UDGN step, measured on an H200: docs/results/
2026-11-27-gpu-check-h200.md), and under ``torch.compile`` (``train.compile``) a shape the data decide would break
the compiled graph.  On CUDA cuDNN copies each layer's and direction's weights into a buffer of their own per call
(a few MB; torch's warning that they are not one contiguous chunk is expected and silenced here).
``DEPINDUCE_LSTM_ROUTE=packed`` runs the packed sequence through the ``nn.LSTM`` itself instead (never while
``torch.compile`` traces), so that ``scripts/gpu_check.sh`` times both.  Outputs at padding positions are
unspecified.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.utils.checkpoint import checkpoint

from depinduce.errors import UsageError
from depinduce.models.layers.dropout import apply_dropout
from depinduce.models.layers.kernels import on_cpu_route
from depinduce.models.layers.memory import should_recompute

# oneDNN's training workspace per token, layer and hidden unit (both directions): ~190 MB per layer measured for
# 4,096 tokens at 256 units, i.e. about 45 floats; rounded up.
_WORKSPACE_FLOATS_PER_UNIT = 48

LSTM_ROUTE_VARIABLE = "DEPINDUCE_LSTM_ROUTE"

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
    """Whether :func:`bidirectional_states` runs ``x`` as a packed sequence (see there; never while
    ``torch.compile`` traces)."""
    if torch.compiler.is_compiling():
        return False
    route = os.environ.get(LSTM_ROUTE_VARIABLE, "").strip().lower()
    if route not in ("", "packed", "per-direction"):
        raise UsageError(f"{LSTM_ROUTE_VARIABLE}={route!r}: expected packed or per-direction "
                         "(or unset: per direction)")
    return route == "packed"


def bidirectional_states(lstm: nn.LSTM, x: torch.Tensor, mask: torch.Tensor, *, dropout: float = 0.0,
                         training: bool = False, recompute: bool | str = False) -> torch.Tensor:
    """(B, T, 2·hidden) states of the bidirectional ``lstm`` (batch first) for ``x`` (B, T, input) and the
    (B, T) real-word ``mask`` (a prefix of each row), ``dropout`` between layers while ``training``.
    ``recompute``: on the CPU's route, keep each layer's input only and rerun the layer in backward (oneDNN's
    LSTM keeps ~190 MB of workspace per layer for a 4,096-token batch at 256 units); ``auto``: only when
    memory would otherwise run short (layers/memory.py)."""
    lengths = mask.sum(dim=-1)
    if _packs(x):
        packed = pack_padded_sequence(x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
        return pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=x.size(1))[0]
    reverse = reversal_rows(lengths, x.size(1))
    recompute = torch.is_grad_enabled() and (on_cpu_route(x) or recompute is True) and should_recompute(
        recompute, x.size(0) * x.size(1) * _WORKSPACE_FLOATS_PER_UNIT * lstm.hidden_size * x.element_size()
        * lstm.num_layers)
    zeros = x.new_zeros((1, x.size(0), lstm.hidden_size))  # every layer's and direction's h0 and c0
    h = x
    for layer in range(lstm.num_layers):
        if layer > 0:
            h = apply_dropout(h, dropout, training)
        if recompute:
            h = checkpoint(_layer, lstm, h, reverse, zeros, layer, use_reentrant=False)
        else:
            h = _layer(lstm, h, reverse, zeros, layer)
    return h


def _layer(lstm: nn.LSTM, h: torch.Tensor, reverse: torch.Tensor, zeros: torch.Tensor, layer: int) -> torch.Tensor:
    """Both directions of one layer, concatenated (B, T, 2·hidden)."""
    left_to_right = _direction(lstm, h, zeros, layer, "")
    right_to_left = _direction(lstm, swap_time(h, reverse), zeros, layer, "_reverse")
    return torch.cat([left_to_right, swap_time(right_to_left, reverse)], dim=-1)


def _direction(lstm: nn.LSTM, x: torch.Tensor, zeros: torch.Tensor, layer: int, suffix: str) -> torch.Tensor:
    """One layer and direction (``suffix`` "" or "_reverse") of ``lstm`` over (B, T, input) ``x``."""
    kinds = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    params = [getattr(lstm, f"{kind}_l{layer}{suffix}") for kind in kinds]
    # (input, (h0, c0), params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
    if x.device.type != "cuda":
        return torch.lstm(x, (zeros, zeros), params, True, 1, 0.0, lstm.training, False, True)[0]
    with warnings.catch_warnings():  # cuDNN copies one direction's weights: expected (module docstring)
        warnings.filterwarnings("ignore", message="RNN module weights are not part of single contiguous chunk")
        return torch.lstm(x, (zeros, zeros), params, True, 1, 0.0, lstm.training, False, True)[0]


class BiLSTM(nn.Module):
    """A multi-layer ``nn.LSTM(bidirectional=True)`` run by :func:`bidirectional_states`, dropout between
    layers."""

    def __init__(self, input_size: int, hidden_size: int, n_layers: int, dropout: float,
                 recompute: bool | str = "auto") -> None:
        super().__init__()
        self.dropout = dropout
        self.recompute = recompute
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=n_layers, bidirectional=True, batch_first=True,
                            dropout=dropout if n_layers > 1 else 0.0)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T, 2·hidden) for ``x`` (B, T, input) and the (B, T) real-word ``mask``."""
        return bidirectional_states(self.lstm, x, mask, dropout=self.dropout, training=self.training,
                                    recompute=self.recompute)
