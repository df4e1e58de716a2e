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
"""

from __future__ import annotations

import numpy as np

from depinduce.models.base import ParseScores, described_decoders
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


AUTHORS_DECODERS = described_decoders(DECODERS, {
    "udgn-tree": lambda scores: authors_tree(word_probabilities(scores)),
    "udgn-argmax": lambda scores: authors_argmax(word_probabilities(scores)),
}, not_trees={"udgn-argmax"})
