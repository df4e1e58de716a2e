"""UDGN's head-selective parser (paper section 3.1, a simplified DENSE) and its undirected dependency mask (3.2).

Own word embedding → dropout → BiLSTM → dropout → Linear(2P → 2P) split into a child and a parent half →
e[i, j] = child_i · parent_j / √P → p[i, ·] = softmax over the sentence's real words.

As in the authors' code the softmax does not exclude the diagonal: the mass p[i, i] a word puts on itself is
the share of its distribution that is no edge of the graph, which the backend scores as its root probability
(see ``model.py``).  Padding columns are excluded and padding rows are zero.

The BiLSTM runs each direction over the real words of each sentence only, as a packed sequence would, so a
sentence's distribution does not depend on its batch-mates (``models/layers/bilstm.py``: how it avoids packing).
"""

from __future__ import annotations

import torch
from torch import nn

from depinduce.models.layers.bilstm import BiLSTM
from depinduce.models.layers.dropout import apply_dropout
from depinduce.models.layers.kernels import position_linear

# Logit of a padding column: finite (an empty row stays NaN-free), and exp() of it underflows to exactly zero.
_PADDING_LOGIT = -1e9


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
