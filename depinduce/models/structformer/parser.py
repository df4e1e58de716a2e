"""StructFormer's parsing network: word embeddings → syntactic distances and heights (paper section 4.1).

``distance[b, i]`` scores the boundary between words i and i+1 (larger = split higher); ``height[b, i]`` scores
how close word i is to the root.  Both live on one scale, which is what lets the parent distribution compare a
word's height with the boundaries around it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from depinduce.models.layers.kernels import position_linear, sequence_conv

# Stand-in for ±infinity at the edges: finite so that sigmoids and differences never produce NaN.
BIG = 1e9


class SyntacticParser(nn.Module):
    """``n_layers`` × [Conv1d(same padding) → LayerNorm without affine → tanh] over the shared word embedding,
    then a height head per word and a distance head over each pair of neighbours.

    Padding is zeroed before every convolution, so a sentence's scores do not depend on how much padding its
    batch has; there are no residual connections (as in the paper and the authors' code).
    """

    def __init__(self, hidden_size: int, n_layers: int, conv_size: int) -> None:
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv1d(hidden_size, hidden_size, conv_size, padding=conv_size // 2) for _ in range(n_layers)
        )
        # Kernel 2: distance i looks at the pair (s_i, s_{i+1}).
        self.distance_conv = nn.Conv1d(hidden_size, hidden_size, 2)
        self.distance_out = nn.Linear(hidden_size, 1)
        self.height_proj = nn.Linear(hidden_size, hidden_size)
        self.height_out = nn.Linear(hidden_size, 1)

    def forward(self, embedded: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Raw (uncalibrated) ``distance`` and ``height``, both (B, T), from ``embedded`` (B, T, H).

        Heights of padding are −BIG; the distance after a sentence's last word and those of padding are +BIG.
        """
        hidden = embedded.size(-1)
        keep = mask.unsqueeze(-1)
        s = embedded
        for conv in self.convs:
            s = s.masked_fill(~keep, 0.0)
            s = torch.tanh(F.layer_norm(sequence_conv(s, conv.weight, conv.bias, conv.padding[0]), (hidden,)))

        projected = position_linear(s, self.height_proj.weight, self.height_proj.bias)
        height = self.height_out(torch.tanh(F.layer_norm(projected, (hidden,)))).squeeze(-1)
        # Padding 1 on both ends: output t sees (s_{t−1}, s_t), so dropping output 0 leaves (s_i, s_{i+1}).
        pairs = sequence_conv(s, self.distance_conv.weight, self.distance_conv.bias, 1)[:, 1:]
        distance = self.distance_out(torch.tanh(F.layer_norm(pairs, (hidden,)))).squeeze(-1)

        height = height.masked_fill(~mask, -BIG)
        distance = distance.masked_fill(~_has_next_word(mask), BIG)
        return distance, height


def _has_next_word(mask: torch.Tensor) -> torch.Tensor:
    """True at positions i whose word i+1 is real: the only boundaries that separate two words."""
    return F.pad(mask[:, 1:], (0, 1), value=False)


def calibrate_distances(distance: torch.Tensor, height: torch.Tensor, mask: torch.Tensor,
                        per_batch: bool = False) -> torch.Tensor:
    """Shift each sentence's distances down by its calibration margin (from the authors' code, not the paper).

    For every span i..j of a sentence (all but the whole sentence), with ``hmax`` its highest word,
    m = min(relu(d_{i−1} − hmax), relu(d_j − hmax)) (d_{−1} = +∞) is how far both of its boundaries rise above
    everything inside it; the largest m is subtracted from all of the sentence's distances, which brings
    distances and heights to the same level.  By default the largest m is taken per sentence, so a sentence's
    structure depends on the sentence alone; ``per_batch`` takes it over the whole batch, as the authors' code
    does in every forward pass (model config ``margin: batch``) — their test-time parse runs one sentence at a
    time, where the two agree.  O(T²) per sentence, fully vectorised (cummax over span ends).
    """
    batch, width = distance.shape
    if width == 0:
        return distance
    index = torch.arange(width, device=distance.device)
    start, end = index[:, None], index[None, :]
    # span_max[b, i, j] = max(height[b, i..j]) for j ≥ i (entries with j < i are never used).
    span_max = height[:, None, :].masked_fill(end < start, -BIG).cummax(dim=-1).values
    left = F.pad(distance[:, :-1], (1, 0), value=BIG)
    margin = torch.minimum(
        torch.relu(left[:, :, None] - span_max),
        torch.relu(distance[:, None, :] - span_max),
    )
    length = mask.sum(dim=-1)[:, None, None]
    valid = (end >= start) & (end < length) & ~((start == 0) & (end == length - 1))
    margin = margin.masked_fill(~valid, 0.0).amax(dim=(1, 2))
    if per_batch:
        margin = margin.amax().expand(batch)
    calibrated = distance - margin[:, None]
    return calibrated.masked_fill(~_has_next_word(mask), BIG)
