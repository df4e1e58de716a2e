"""Compound PCFG hyperparameters; the defaults are the paper's (Kim, Dyer & Rush 2019, section 4 and the authors'
train.py): 30 nonterminals, 60 preterminals, symbol embeddings of 256, z of 64, an inference network of 512-wide
word embeddings and a 512-per-direction BiLSTM."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from depinduce.models.config_checks import ConfigChecks


@dataclass
class CPCFGConfig:
    """The grammar's size and networks (optimisation settings live in the recipe, not here).

    ``compound``: true is the compound PCFG (rule, root and terminal distributions conditioned on a per-sentence
    latent z, trained by the ELBO); false drops z and the inference network: the plain *neural PCFG* of the same
    paper, trained by the exact log-likelihood.
    ``state_dim``: the symbol embeddings and the hidden width of the root and terminal MLPs.
    ``z_dim``, ``word_dim``, ``lstm_dim``: the latent, and the inference network's word embedding and BiLSTM width
    per direction (unused when ``compound`` is false).
    ``pooling``: how the BiLSTM states become q(z | x)'s mean and log-variance — ``max`` over positions (the
    authors' code) or ``mean``.
    ``decode``: the tree ``parse`` and dev evaluation give — ``viterbi``, the most probable derivation's bracketing
    (max-product CKY; the authors' eval.py, so the paper's parses), or ``mbr``, the bracketing with the largest
    sum of posterior span marginals (CKY over the marginals: minimum Bayes risk for expected span recall).
    Either is computed with z = the posterior mean, as the authors' eval.py.
    ``eval_z``: z in evaluation mode when the *loss* is computed (dev loss, ``depinduce perplexity``) — ``mean``
    (the plug-in estimate: lower variance, but not a bound) or ``sample``: one draw from q(z | x) per sentence
    from a fixed seed, so the figure is a single-sample estimate of the ELBO and its expectation bounds the
    perplexity from above (what the authors' train.py reports).
    ``viterbi_memory_mb``: the max-product chart (float64, so that near-ties are not settled by round-off) builds,
    per span width, (spans, splits, NT, NT) and (spans, NT, NT+T, NT+T)-sized tensors before reducing them;
    ``parse`` with ``decode: viterbi`` runs sentences in groups that keep them under this many megabytes (one
    sentence at a time at least).
    """

    nt: int = 30
    t: int = 60
    state_dim: int = 256
    compound: bool = True
    z_dim: int = 64
    word_dim: int = 512
    lstm_dim: int = 512
    pooling: Literal["max", "mean"] = "max"
    decode: Literal["viterbi", "mbr"] = "viterbi"
    eval_z: Literal["mean", "sample"] = "mean"
    viterbi_memory_mb: int = 512

    def __post_init__(self) -> None:
        check = ConfigChecks("cpcfg", self)
        check.positive_ints("nt", "t", "state_dim", "z_dim", "word_dim", "lstm_dim", "viterbi_memory_mb")
        check.booleans("compound")
        check.choices("pooling", ("max", "mean"))
        check.choices("decode", ("viterbi", "mbr"))
        check.choices("eval_z", ("mean", "sample"))
