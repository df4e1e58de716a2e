"""The authors' decoders for the Probabilistic Transformer's head marginals (their ``evaluate.py`` and
``HeadRecorder.get_dependency_heads``), next to depinduce's shared ones.

Their convention differs from depinduce's ``mst``/``eisner``/``argmax`` in three ways:

- trees are scored by the *sum of head probabilities* Q̄_h[i, j] (the channels' average, or one channel), not of
  log-probabilities;
- the MLM model has no ROOT node, and they give ROOT probability 0 (a zero column added to the n × n record)
  where depinduce scores the share of head mass a word receives; a model with ROOT (their
  ``RootedHeadProbEncoder``) records Q̄_h[i, ROOT] and they use it;
- ``argmax`` takes each word's most probable head, which without a ROOT node is always a word (every word gets
  a word head: no root, and cycles).

``probformer-nonprojective`` lowers the ROOT column by c = 1 + n·(max − min) and runs Chu-Liu/Edmonds without
the root constraint (supar's ``chuliu_edmonds``), which yields the best single-rooted tree
(:mod:`depinduce.structures.root_reweighting`); ``probformer-projective`` is Eisner with one root (supar's
``DependencyCRF(multiroot=False).argmax``).  Both are exact, so only equally scored trees could come out
differently from supar's (tie order); ``argmax`` breaks ties towards the leftmost head, as torch's ``max`` does.
One deliberate difference: for a one-word sentence without ROOT their ``argmax`` makes the word its own head (its
only column); here it takes ROOT, since a word cannot head itself in a tree file (their UAS counts it wrong).

The probabilities are read back from depinduce's score matrix (exp of log Q̄_h, floored at float32's smallest
normal number), so they agree with the authors' to float32 round-off.

``parse --probs`` with these decoders prints the matrix they read (:func:`printed_probabilities`): without a ROOT
node ROOT's column is 0, so a tree's root word shows probability 0 — their convention, not an estimate; the
shared decoders' rows give ROOT the received share instead.  A one-word sentence's row is ROOT = 1.
"""

from __future__ import annotations

import numpy as np
import torch

from depinduce.models.base import OwnDecoder, ParseScores, described_decoders, normalised_rows
from depinduce.models.probformer.decoder_info import descriptions
from depinduce.structures.eisner import eisner_single
from depinduce.structures.root_reweighting import root_reweighted_tree


def head_probabilities(log_scores: torch.Tensor, *, root_node: bool) -> np.ndarray:
    """The authors' (n+1)×(n+1) probability matrix from a ProbFormer score matrix (log Q̄_h, column 0 = ROOT):
    P[i, j] = Q̄_h[i, j], 0 on the diagonal; ROOT column Q̄_h[i, ROOT] with a ROOT node, else 0; row 0 zero."""
    probs = log_scores.detach().double().cpu().exp().numpy().copy()
    probs[0] = 0.0
    if not root_node:
        probs[1:, 0] = 0.0
    return probs


def argmax_tree(probs: np.ndarray, *, root_node: bool) -> list[int]:
    """Each word's most probable head (first on ties): among ROOT and the words with a ROOT node, among the
    words alone without one (a one-word sentence then takes ROOT; see the module docstring)."""
    n = probs.shape[0] - 1
    if root_node:
        return probs[1:].argmax(axis=1).tolist()
    if n <= 1:
        return [0] * n
    return (probs[1:, 1:].argmax(axis=1) + 1).tolist()


def printed_probabilities(scores: ParseScores) -> torch.Tensor:
    """What ``--probs`` prints with the authors' decoders of a model without a ROOT node: the rows of their
    matrix (:func:`head_probabilities`: ROOT 0, Q̄_h over the other words) summing to 1 in float64; a one-word
    sentence's row is ROOT = 1, the head their ``argmax`` gives it here."""
    assert scores.heads is not None
    return normalised_rows(torch.from_numpy(head_probabilities(scores.heads, root_node=False)[1:]))


def authors_decoders(*, root_node: bool) -> dict[str, OwnDecoder]:
    """The three decoders of the authors' ``evaluate.py`` for a model with or without the ROOT node; without it
    they read ROOT at probability 0, which ``--probs`` then prints (with it, the marginals the shared decoders
    read too)."""

    def probabilities(scores: ParseScores) -> np.ndarray:
        assert scores.heads is not None
        return head_probabilities(scores.heads, root_node=root_node)

    names = ("probformer-argmax", "probformer-nonprojective", "probformer-projective")
    return described_decoders(descriptions(root_node=root_node), {
        "probformer-argmax": lambda scores: argmax_tree(probabilities(scores), root_node=root_node),
        "probformer-nonprojective": lambda scores: root_reweighted_tree(probabilities(scores)),
        "probformer-projective": lambda scores: eisner_single(probabilities(scores)),
    }, not_trees={"probformer-argmax"}, probs={} if root_node else dict.fromkeys(names, printed_probabilities))
