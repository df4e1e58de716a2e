"""The authors' decoders for UDGN's head distribution p (yikangshen/UDGN, ``test_phrase_grammar.py``), beside
depinduce's ``mst`` and ``argmax`` over the backend's scores (log p[i, j] for word heads, log p[i, i] for ROOT).

Both of theirs read p with its diagonal zeroed (the graph's ``head``), so the self-mass p[i, i] plays no part:

- ``udgn-tree`` (their ``dms``): word-to-word scores log(p[i, j] + 1e-9), computed in float32 as theirs are;
  every root candidate scores 0; each word in turn is made the only root, Chu-Liu/Edmonds finds the best tree,
  and the first best of those trees wins (:mod:`depinduce.structures.root_trials`).  The root is thus the word
  whose best tree loses least by giving it no head — not the word with the most self-mass, as ``mst`` decides.
- ``udgn-argmax`` (their ``argmax``): each word's most probable *other* word (numpy's argmax, the first on ties).
  It never gives ROOT except where a word is its own argmax: a one-word sentence, or a first word whose mass on
  the other words underflows to 0 in float32; a later word with such a row takes word 1.

``parse --probs`` prints what each reads, each row summing to 1 (``mst``/``eisner``/``argmax`` read the model's
p, self-mass as ROOT):

- ``udgn-argmax``: p over the other words, renormalised, and ROOT 0 (1 for a row without word mass, such as a
  one-word sentence's): each row's argmax is its head, but where a later word's float32 row underflows to 0
  the authors' argmax gives it word 1 and the row says ROOT;
- ``udgn-tree``: its weights [0, log(p + 1e-9)] made a distribution per row, [1, p + 1e-9] over its sum, about
  2 − p[i, i] (dividing a row by a constant changes no tree's rank).  ROOT is then at least about 1/2 in every
  row, the authors' score 0 = log 1 for every root candidate: the root is the word whose tree loses least by
  giving it no word head, so ROOT's share is largest for a word that keeps much self-mass.
"""

from __future__ import annotations

import numpy as np
import torch

from depinduce.models.base import ParseScores, described_decoders, normalised_rows, row_softmax
from depinduce.models.udgn.decoder_info import DECODERS
from depinduce.structures.root_trials import tree_over_root_trials

# The authors add it to p before the log: the floor of a word-to-word score is log(1e-9) ≈ −20.7.
_TREE_EPSILON = np.float32(1e-9)


def word_probabilities(scores: ParseScores) -> np.ndarray:
    """p (n×n, float32) between the sentence's words with a zero diagonal, from the backend's log p."""
    assert scores.heads is not None
    p = scores.heads[1:, 1:].detach().float().cpu().exp().numpy()
    np.fill_diagonal(p, 0.0)
    return p


def authors_tree(p: np.ndarray) -> list[int]:
    """The authors' ``dms`` on p (n×n, zero diagonal): heads 1-based, 0 = ROOT."""
    n = p.shape[0]
    weights = np.zeros((n + 1, n + 1))  # column 0: every root candidate scores 0
    weights[1:, 1:] = np.log(p.astype(np.float32) + _TREE_EPSILON)
    return tree_over_root_trials(weights)


def authors_argmax(p: np.ndarray) -> list[int]:
    """The authors' ``argmax`` on p (n×n, zero diagonal): heads 1-based, 0 = ROOT only where a word is its own
    argmax."""
    best = np.argmax(p, axis=1)
    return [0 if int(j) == i else int(j) + 1 for i, j in enumerate(best)]


def tree_weights(p: np.ndarray) -> np.ndarray:
    """The authors' ``dms`` weights for p (n×n, zero diagonal): (n+1)×(n+1), column 0 (every root) 0, word
    heads log(p + 1e-9) in float32 as theirs; the diagonal and row 0 −inf (no self-loop, no dependent ROOT)."""
    n = p.shape[0]
    weights = np.full((n + 1, n + 1), -np.inf)
    weights[1:, 0] = 0.0
    weights[1:, 1:] = np.log(p.astype(np.float32) + _TREE_EPSILON)
    weights[range(1, n + 1), range(1, n + 1)] = -np.inf
    return weights


def tree_probs(scores: ParseScores) -> torch.Tensor:
    """What ``--probs`` prints with ``udgn-tree``: each row of its weights as a distribution."""
    return row_softmax(torch.from_numpy(tree_weights(word_probabilities(scores))[1:]))


def argmax_probs(scores: ParseScores) -> torch.Tensor:
    """What ``--probs`` prints with ``udgn-argmax``: the float32 p it compares, over the other words, each row
    renormalised; ROOT 0, or 1 in a row without word mass."""
    p = word_probabilities(scores)
    rows = np.zeros((p.shape[0], p.shape[0] + 1))
    rows[:, 1:] = p
    return normalised_rows(torch.from_numpy(rows))


AUTHORS_DECODERS = described_decoders(DECODERS, {
    "udgn-tree": lambda scores: authors_tree(word_probabilities(scores)),
    "udgn-argmax": lambda scores: authors_argmax(word_probabilities(scores)),
}, not_trees={"udgn-argmax"}, probs={"udgn-tree": tree_probs, "udgn-argmax": argmax_probs})
