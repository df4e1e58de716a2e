"""PRPN's reading network (one layer) and predict network: LSTM cells whose previous state is a gated attention
over the last S states, and a gated attention over the top layer's past states that feeds the output.

Only the reading recurrence is sequential.  Everything that does not depend on the previous step — the input
half of every gate (with its layer norm), the input half of the attention key, the gates themselves (they come
from the parsing network) — is computed for all positions before the loop, and the predict network runs on all
positions at once after it; each step of the loop is then a handful of batched matrix products.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from depinduce.models.layers.dropout import apply_dropout

# Added to the gated attention mass before renormalising: every slot can be closed (weight 0 everywhere).
_EPS = 1e-6


def gated_attention(logits: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
    """The paper's structured attention (its eq. 11): softmax weights times gates, renormalised."""
    weights = torch.softmax(logits, dim=-1) * gates
    return weights / (weights.sum(dim=-1, keepdim=True) + _EPS)


class ReadingLayer(nn.Module):
    """One reading layer: a layer-normalised LSTM cell (as the authors': layer norm on the input and hidden
    halves of the gates and on the cell before its tanh) whose (h, c) input is the structured attention over a
    tape of the last S (h, c) pairs, newest first."""

    def __init__(self, input_size: int, hidden_size: int, dropout: float, rdropout: float) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.dropout = dropout
        self.rdropout = rdropout
        # gate order: input, forget, output (sigmoids, one call), then the cell candidate (tanh)
        self.ih = nn.Linear(input_size, 4 * hidden_size)
        self.ih_norm = nn.LayerNorm(4 * hidden_size)
        self.hh = nn.Linear(hidden_size, 4 * hidden_size)
        self.hh_norm = nn.LayerNorm(4 * hidden_size)
        self.c_norm = nn.LayerNorm(hidden_size)
        # the attention key k_t = W_x x_t + W_h h_(t−1) (the paper's eq. 9)
        self.key_x = nn.Linear(input_size, hidden_size)
        self.key_h = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, x: torch.Tensor, gates: torch.Tensor, tape: torch.Tensor | None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Outputs h (B, T, H) for inputs ``x`` (B, T, I) and reading gates (B, T, S); ``tape`` (B, S, 2H) holds
        the (h, c) pairs before the first position, oldest first (None: zeros, a fresh sequence).  Returns the
        outputs and the tape after the last position.

        Per-step values are taken with ``unbind`` and the slot window is a ``stack`` of the kept states, never a
        slice of a growing tensor: the backward of a slice materialises a zero tensor of the whole, which made the
        loop quadratic in the sentence length.
        """
        batch, length, _ = x.shape
        size, slots = self.hidden_size, gates.shape[-1]
        if tape is None:
            zero = x.new_zeros(batch, size)
            hs, cs = [zero] * slots, [zero] * slots
        else:
            hs, cs = list(tape[..., :size].unbind(1)), list(tape[..., size:].unbind(1))
        x = apply_dropout(x, self.dropout, self.training)
        input_gates = self.ih_norm(self.ih(x)).unbind(1)
        input_keys = self.key_x(x).unbind(1)
        step_gates = gates.unbind(1)
        keep = None
        if self.training and self.rdropout > 0:
            keep = torch.bernoulli(x.new_full((1, size), 1.0 - self.rdropout)) / (1.0 - self.rdropout)
        scale = 1.0 / math.sqrt(size)
        for t in range(length):
            h_tape = torch.stack(hs[: -slots - 1 : -1], dim=1)  # (B, S, H), newest first
            c_tape = torch.stack(cs[: -slots - 1 : -1], dim=1)
            key = input_keys[t] + self.key_h(hs[-1])
            logits = torch.bmm(h_tape, key.unsqueeze(-1)).squeeze(-1) * scale
            weights = gated_attention(logits, step_gates[t]).unsqueeze(1)
            h_prev = torch.bmm(weights, h_tape).squeeze(1)
            c_prev = torch.bmm(weights, c_tape).squeeze(1)
            if keep is not None:
                h_prev = h_prev * keep
            z = input_gates[t] + self.hh_norm(self.hh(h_prev))
            sigmoid_part, candidate = z.split([3 * size, size], dim=1)
            in_gate, forget_gate, out_gate = torch.sigmoid(sigmoid_part).chunk(3, dim=1)
            c = forget_gate * c_prev + in_gate * torch.tanh(candidate)
            h = out_gate * torch.tanh(self.c_norm(c))
            hs.append(h)
            cs.append(c)
        outputs = torch.stack(hs[slots:], dim=1)
        last = torch.cat([torch.stack(hs[-slots:], dim=1), torch.stack(cs[-slots:], dim=1)], dim=-1)
        return outputs, last


class PredictNetwork(nn.Module):
    """Gated attention over the top layer's previous S states (gates from the next-distance guess), then
    tanh(BatchNorm(Linear([h_t; summary]))) — the input of the tied output layer."""

    def __init__(self, hidden_size: int, output_size: int, dropout: float) -> None:
        super().__init__()
        self.dropout = dropout
        self.key = nn.Linear(hidden_size, hidden_size)
        self.project = nn.Linear(2 * hidden_size, output_size)
        self.norm = nn.BatchNorm1d(output_size)

    def forward(self, top: torch.Tensor, gates: torch.Tensor, rows: torch.Tensor, history: torch.Tensor | None
                ) -> torch.Tensor:
        """Predict-network outputs (N, O) for the N positions ``rows`` (B, T) marks, in row-major order.

        ``top`` (B, T, H) are the top reading layer's outputs, ``gates`` (B, T, S) the predicting gates and
        ``history`` (B, S, H) the top-layer states before the first position, oldest first (None: zeros).
        The attention runs on whole rows — scores against every state, then the band of each position's S
        previous states gathered — instead of materialising an (N, H, S) window: a (B, T, S + T) score matrix
        is far smaller than the windows, and its gradients are too.
        """
        batch, length, size = top.shape
        slots = gates.shape[-1]
        if history is None:
            history = top.new_zeros(batch, slots, size)
        padded = torch.cat([history, top], dim=1)  # (B, S + T, H): position t of top is S + t here
        key = self.key(apply_dropout(top, self.dropout, self.training))
        scores = torch.bmm(key, padded.transpose(1, 2)) / math.sqrt(size)  # (B, T, S + T)
        # band[t, k] = S + t − 1 − k: the state of token t−1−k, newest first
        band = (slots - 1 + torch.arange(length, device=top.device).unsqueeze(1)
                - torch.arange(slots, device=top.device)).expand(batch, length, slots)
        weights = gated_attention(scores.gather(2, band), gates)
        spread = scores.new_zeros(scores.shape).scatter(2, band, weights)
        summary = torch.bmm(spread, padded)  # (B, T, H)
        joined = apply_dropout(torch.cat([top[rows], summary[rows]], dim=-1), self.dropout, self.training)
        return torch.tanh(self.norm(self.project(joined)))
