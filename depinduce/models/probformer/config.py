"""Probabilistic Transformer hyperparameters; the defaults are the paper's PTB masked-LM setting (Wu and Tu 2023,
appendix E, and the authors' ``crf-mlm-ptb`` configuration; see docs/models-reference.md), and the ROOT variant's
switches
default to what the authors' ``RootedHeadProbEncoder`` does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from depinduce.models.config_checks import ConfigChecks

DECOMPOSITIONS = ("uv", "uvw", "none")
ROOT_NORMS = ("separate", "joint")


@dataclass
class ProbFormerConfig:
    """The CRF's shape, its inference and its regularisation (optimisation settings live in the recipe).

    ``d``: size of the latent label set Z (also the width of the word's unary-score row and of the output layer's
    input).  ``n_channels``: C, the number of dependency structures (head variables per word).  ``n_iter``: mean-field
    iterations.  ``distance_threshold``: t; a head at offset 1..t from its dependent has its own ternary scores, every
    offset beyond t shares one, separately for heads on the right and on the left (2·(t+1) distance buckets).
    ``decomposition``: how the ternary score tensor T[k][a, b, c] is parameterised — ``uv`` (per bucket and channel
    a rank-``rank`` product U·Vᵀ, the paper's MLM choice), ``uvw`` (one rank-``rank`` Kruskal form per bucket over
    labels × labels × channels) or ``none`` (the full d × d × C tensor per bucket; small d only).
    ``dropout``: applied to the label scores q_z after every update and to the head marginals Q_h.
    ``root``: add the paper's dummy ROOT node (section 2.3.5): every word's head may also be ROOT, whose latent
    label (``root_size`` values, default d) becomes a sentence representation.  ``ternary_l2``: weight of the
    Frobenius norm of the reconstructed ternary tensor added to the training loss.

    The ROOT variant's switches (they change nothing without ``root``); each default is the authors' code:

    - ``root_dropout``: dropout (rate ``dropout``) on the root label's scores q_R after every update, as on q_z
      (the authors' ``dropout_z`` on ``q_root``); false: q_R is never dropped.
    - ``root_decomposition``: the form of the root tensor T_root, independent of ``decomposition`` (the authors'
      ``use_root_td``, default the full d × d_root × C tensor); ``uv``/``uvw`` use ``rank``, as theirs takes the
      words' rank.
    - ``root_norm``: ``separate`` adds ``ternary_l2`` · ‖T_root‖_F as a term of its own (the authors' trainer
      adds one weighted norm per ``add_norm`` entry, ``getRootTernaryNorm`` beside ``getTernaryNorm``; depinduce
      uses ``ternary_l2`` for both); ``joint`` takes one norm of all ternary scores,
      ``ternary_l2`` · √(‖T‖²_F + ‖T_root‖²_F).

    ``recompute`` is an implementation choice, not a hyperparameter, and leaves the results unchanged: each
    iteration's intermediate tensors (the rank projections, about 4·2(t+1)·C·rank floats per token) are recomputed
    in backward from the iteration's input instead of being kept for all ``n_iter`` iterations, for one more
    forward pass.  Under ``train.compile`` it is left to the compiler, which partitions forward and backward itself.
    """

    d: int = 384
    n_channels: int = 16
    n_iter: int = 5
    decomposition: Literal["uv", "uvw", "none"] = "uv"
    rank: int = 64
    distance_threshold: int = 3
    dropout: float = 0.15
    root: bool = False
    root_size: int | None = None
    root_dropout: bool = True
    root_decomposition: Literal["uv", "uvw", "none"] = "none"
    root_norm: Literal["separate", "joint"] = "separate"
    ternary_l2: float = 5e-4
    recompute: bool = True

    def __post_init__(self) -> None:
        check = ConfigChecks("probformer", self)
        check.positive_ints("d", "n_channels", "n_iter", "rank", "distance_threshold")
        check.choices("decomposition", DECOMPOSITIONS)
        check.choices("root_decomposition", DECOMPOSITIONS)
        check.choices("root_norm", ROOT_NORMS)
        check.probabilities("dropout")
        check.booleans("root", "root_dropout", "recompute")
        size = self.root_size
        check.need(size is None or (isinstance(size, int) and not isinstance(size, bool) and size >= 1),
                   f"root_size must be a positive integer or null (= d), not {size!r}")
        l2 = self.ternary_l2
        check.need(isinstance(l2, (int, float)) and not isinstance(l2, bool) and l2 >= 0,
                   f"ternary_l2 must be a non-negative number, not {l2!r}")

    @property
    def n_buckets(self) -> int:
        """Distance buckets: offsets 1..t and beyond t, for heads on the right and on the left."""
        return 2 * (self.distance_threshold + 1)

    @property
    def root_labels(self) -> int:
        return self.root_size if self.root_size is not None else self.d
