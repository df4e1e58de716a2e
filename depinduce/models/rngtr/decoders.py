"""The authors' decoder for RNGTr's arc scores (idiap/g2g-transformer), next to depinduce's exact one.

Their ``decode_mst`` turns each word's arc scores into probabilities (a softmax over the other words and ROOT;
a word never heads itself) and runs Dozat & Manning's Chu-Liu/Edmonds with its one-root rule over those
*probabilities*: the best tree by the sum of arc probabilities, and when several words hang on ROOT there, the
best of the trees that keep only one of them (:func:`~depinduce.structures.mst.root_retry_tree`; the rule is
exact, so the difference is the objective alone).  depinduce's default ``mst`` maximises the sum of
*log*-probabilities — the product of the arc probabilities, the tree's probability under the model's
independent per-word head distributions; the two choose different trees for about a quarter of random 8-word
matrices.
"""

from __future__ import annotations

import torch

from depinduce.models.base import ParseScores, described_decoders
from depinduce.models.rngtr.decoder_info import DECODERS
from depinduce.structures.mst import root_retry_tree


def probability_tree(log_probs: torch.Tensor) -> list[int]:
    """Heads of one sentence by the authors' rule, from its (n+1)×(n+1) arc log-probabilities (row 0 unused).

    The rows are renormalised without the diagonal first (depinduce's rows already exclude it; any row that
    does not is treated as the authors' masked softmax would)."""
    n = log_probs.shape[0] - 1
    scores = log_probs.detach().double().cpu().clone()
    scores[range(1, n + 1), range(1, n + 1)] = float("-inf")
    probs = torch.softmax(scores[1:], dim=-1)
    matrix = torch.zeros((n + 1, n + 1), dtype=torch.float64)
    matrix[1:] = probs
    matrix[range(1, n + 1), range(1, n + 1)] = float("-inf")
    return root_retry_tree(matrix.numpy())


def _decode(scores: ParseScores) -> list[int]:
    assert scores.heads is not None
    return probability_tree(scores.heads)


AUTHORS_DECODERS = described_decoders(DECODERS, {"rngtr-mst": _decode})
