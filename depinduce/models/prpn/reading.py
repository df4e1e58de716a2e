"""PRPN's reading network (one layer) and predict network: LSTM cells whose previous state is a gated attention
over the last S states, and a gated attention over the top layer's past states that feeds the output.

Only the reading recurrence is sequential.  Everything that does not depend on the previous step — the input
half of every gate (with its layer norm), the input half of the attention key, the gates themselves (they come
from the parsing network) — is computed for all positions before the loop, and the predict network runs on all
positions at once after it; each step of the loop is then a handful of batched matrix products.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

from depinduce.models.layers.dropout import apply_dropout
from depinduce.models.layers.kernels import plain_ops
from depinduce.models.layers.masked_norm import masked_batch_norm
from depinduce.models.prpn.norm import LayerNormKind, layer_norm

# Added to the gated mass before renormalising, as the authors do: every slot can be closed (weight 0 everywhere).
_EPS = 1e-8

DropoutPlacement = Literal["authors", "depinduce"]


def gated_attention(logits: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
    """The paper's structured attention (its eq. 11) normalised as the authors' code does:
    e^(x − max x)·g / (Σ e^(x − max x)·g + 1e-8).

    Renormalising softmax weights instead (softmax(x)·g / (Σ softmax(x)·g + ε)) puts ε·Σ e^(x − max x) in the
    denominator, so an attention whose open slots hold little of the softmax mass would shrink towards zero."""
    weights = torch.exp(logits - logits.amax(dim=-1, keepdim=True)) * gates
    return weights / (weights.sum(dim=-1, keepdim=True) + _EPS)


class ReadingLayer(nn.Module):
    """One reading layer: a layer-normalised LSTM cell (as the authors': layer norm on the input and hidden
    halves of the gates and on the cell before its tanh) whose (h, c) input is the structured attention over a
    tape of the last S (h, c) pairs, newest first.

    Dropout: ``dropout`` on the LSTM's input x_t, ``rdropout`` on the attended h (one mask per sequence).  The
    attention key k_t = W_x x_t + W_h h_(t−1) + b (the paper's eq. 9) is dropped as ``placement`` says:
    ``authors`` drops its input [x_t; h_(t−1)] and its output at ``key_dropout``, each with its own masks (the
    authors' reading network); ``depinduce`` feeds W_x the LSTM input's dropped x_t (the same mask) and drops
    neither h_(t−1) nor the key.
    """

    def __init__(self, input_size: int, hidden_size: int, dropout: float, rdropout: float, *,
                 key_dropout: float = 0.0, placement: DropoutPlacement = "authors",
                 norm: LayerNormKind = "torch", authors_init: bool = True) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.dropout = dropout
        self.rdropout = rdropout
        self.key_dropout = key_dropout
        self.placement = placement
        # gate order: input, forget, output (sigmoids, one call), then the cell candidate (tanh)
        self.ih = nn.Linear(input_size, 4 * hidden_size)
        self.ih_norm = layer_norm(4 * hidden_size, norm)
        self.hh = nn.Linear(hidden_size, 4 * hidden_size)
        self.hh_norm = layer_norm(4 * hidden_size, norm)
        self.c_norm = layer_norm(hidden_size, norm)
        # the attention key, one linear map of [x_t; h_(t−1)] split in two (W_x's half runs on all positions at
        # once); with ``authors_init`` initialised as that single map would be, uniform ±1/√(I + H)
        self.key_x = nn.Linear(input_size, hidden_size)
        self.key_h = nn.Linear(hidden_size, hidden_size, bias=False)
        if authors_init:
            bound = 1.0 / math.sqrt(input_size + hidden_size)
            for weight in (self.key_x.weight, self.key_x.bias, self.key_h.weight):
                nn.init.uniform_(weight, -bound, bound)

    def key_step_masks(self, x: torch.Tensor) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        """The authors' per-step dropout masks (0 or 1/(1 − p), (B, H) each) for h_(t−1) and for the key at every
        position of ``x`` (B, T, I), drawn before the loop: two draws per layer instead of two per step."""
        ones = x.new_ones(x.shape[0], x.shape[1], self.hidden_size)
        return (apply_dropout(ones, self.key_dropout, True).unbind(1),
                apply_dropout(ones, self.key_dropout, True).unbind(1))

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
        lstm_input = apply_dropout(x, self.dropout, self.training)
        input_gates = self.ih_norm(self.ih(lstm_input)).unbind(1)
        authors = self.placement == "authors"
        key_input = apply_dropout(x, self.key_dropout, self.training) if authors else lstm_input
        input_keys = self.key_x(key_input).unbind(1)
        step_gates = gates.unbind(1)
        keep = None
        if self.training and self.rdropout > 0:
            keep = torch.bernoulli(x.new_full((1, size), 1.0 - self.rdropout)) / (1.0 - self.rdropout)
        masks = self.key_step_masks(x) if authors and self.training and self.key_dropout > 0 else None
        scale = 1.0 / math.sqrt(size)
        for t in range(length):
            h_tape = torch.stack(hs[: -slots - 1 : -1], dim=1)  # (B, S, H), newest first
            c_tape = torch.stack(cs[: -slots - 1 : -1], dim=1)
            if masks is not None:
                key = (input_keys[t] + self.key_h(hs[-1] * masks[0][t])) * masks[1][t]
            else:
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
    """Gated attention over the top layer's previous S states h_(t−1) … h_(t−S) (gates from the next-distance
    guess; the authors' code pushes h_t onto its memory after attending, so it reads the same states), then
    tanh(BatchNorm(Linear([h_t; summary]))) — the input of the tied output layer.

    Dropout at ``dropout`` on [h_t; summary] and on the key's input, and with ``placement: authors`` on the key's
    output too (the authors' Dropout → Linear → Dropout); ``depinduce`` drops the key once, before its layer.
    With ``authors_init`` BatchNorm's scale starts uniform in [0, 1), as torch 0.3's BatchNorm did for the
    authors (otherwise at 1, torch's default)."""

    def __init__(self, hidden_size: int, output_size: int, dropout: float, *,
                 placement: DropoutPlacement = "authors", authors_init: bool = True) -> None:
        super().__init__()
        self.dropout = dropout
        self.placement = placement
        self.key = nn.Linear(hidden_size, hidden_size)
        self.project = nn.Linear(2 * hidden_size, output_size)
        self.norm = nn.BatchNorm1d(output_size)
        if authors_init:
            nn.init.uniform_(self.norm.weight, 0.0, 1.0)

    def forward(self, top: torch.Tensor, gates: torch.Tensor, rows: torch.Tensor, history: torch.Tensor | None
                ) -> torch.Tensor:
        """Predict-network outputs (B, T, O) at the positions ``rows`` (B, T) marks (zero elsewhere; BatchNorm's
        statistics are theirs).

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
        if self.placement == "authors":
            key = apply_dropout(key, self.dropout, self.training)
        scores = torch.bmm(key, padded.transpose(1, 2)) / math.sqrt(size)  # (B, T, S + T)
        # band[t, k] = S + t − 1 − k: the state of token t−1−k, newest first
        band = (slots - 1 + torch.arange(length, device=top.device).unsqueeze(1)
                - torch.arange(slots, device=top.device)).expand(batch, length, slots)
        weights = gated_attention(scores.gather(2, band), gates)
        spread = scores.new_zeros(scores.shape).scatter(2, band, weights)
        summary = torch.bmm(spread, padded)  # (B, T, H)
        if plain_ops(top):  # every position, BatchNorm over the marked ones: no host read, a static shape
            joined = apply_dropout(torch.cat([top, summary], dim=-1), self.dropout, self.training)
            output = torch.tanh(masked_batch_norm(self.project(joined), rows, self.norm))
            return output.masked_fill(~rows.unsqueeze(-1), 0.0)
        joined = apply_dropout(torch.cat([top[rows], summary[rows]], dim=-1), self.dropout, self.training)
        output = torch.tanh(self.norm(self.project(joined)))
        return output.new_zeros(batch, length, output.shape[-1]).masked_scatter(rows.unsqueeze(-1), output)
