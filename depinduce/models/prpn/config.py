"""PRPN hyperparameters; the defaults are the paper's unsupervised-parsing setting (Shen et al. 2018, section 6.3,
and docs/models-reference.md): emb 200, hidden 400, 2 reading layers, 15 memory slots, look-back 5, resolution 0.1,
dropout 0.2, hard gates, tied output layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from depinduce.models.config_checks import ConfigChecks


@dataclass
class PRPNConfig:
    """Network shape and regularisation (optimisation settings live in the recipe, not here).

    ``gate``: ``hard`` is α(a, b) = clamp(1 + (a − b)/resolution, 0, 1), the variant behind the paper's parsing
    numbers; ``soft`` is its smooth version sigmoid(10·(a − b)/resolution + 5) (both as in the authors' code).
    ``dropout`` applies to the first reading layer's LSTM input (the embeddings) and the predict network's output,
    ``idropout`` to the inputs of the parsing network, of the upper reading layers' LSTMs and of the predict
    network, ``rdropout`` to each reading layer's attended hidden state (one mask per sequence, as in the
    authors' code).
    ``dropout_placement``: where the attention keys are dropped.  ``authors`` (the paper setting) as the authors'
    code: each reading layer's key drops its input [x_t; h_(t−1)] and its output at ``idropout`` with masks of its
    own, and the predict network's key drops before and after its layer; ``depinduce`` reuses the LSTM input's
    mask for x_t, drops neither h_(t−1) nor the key, and drops the predict key once, before its layer.
    ``layer_norm``: the reading layers' layer norm, ``torch`` (nn.LayerNorm: biased variance, ε inside the root;
    one fused kernel) or ``authors`` (the paper setting: γ(x − μ)/(unbiased σ + 1e-6) + β); see ``norm.py``.
    ``tree``: ``paper`` parses as the paper's appendix A (split at the deepest word k into (w_<k)(w_k (w_>k)));
    ``distances`` splits between the two words of the largest gap instead, as StructFormer and ON-LSTM do.
    ``init``: ``authors`` starts from the authors' initialisation under torch 0.3 (BatchNorm scales uniform in
    [0, 1), the distance heads ±1/√H, the reading key as one map of [x_t; h_(t−1)]); ``depinduce`` (its earlier
    initialisation) from torch's defaults for those layers (scales 1, the heads ±1/√(H/2), the key's two halves
    ±1/√I and ±1/√H).  The same network either way; only the starting point differs.
    """

    emb_size: int = 200
    hidden_size: int = 400
    n_layers: int = 2
    n_slots: int = 15
    lookback: int = 5
    resolution: float = 0.1
    gate: Literal["hard", "soft"] = "hard"
    dropout: float = 0.2
    idropout: float = 0.2
    rdropout: float = 0.0
    tree: Literal["paper", "distances"] = "paper"
    dropout_placement: Literal["authors", "depinduce"] = "authors"
    layer_norm: Literal["torch", "authors"] = "torch"
    init: Literal["authors", "depinduce"] = "authors"

    def __post_init__(self) -> None:
        check = ConfigChecks("prpn", self)
        check.positive_ints("emb_size", "hidden_size", "n_layers", "n_slots", "lookback")
        check.need(isinstance(self.resolution, (int, float)) and not isinstance(self.resolution, bool)
                   and self.resolution > 0, f"resolution must be a positive number, not {self.resolution!r}")
        check.choices("gate", ("hard", "soft"))
        check.choices("tree", ("paper", "distances"))
        check.choices("dropout_placement", ("authors", "depinduce"))
        check.choices("layer_norm", ("torch", "authors"))
        check.choices("init", ("authors", "depinduce"))
        check.probabilities("dropout", "idropout", "rdropout")
        check.need(self.hidden_size % 2 == 0,
                   f"hidden_size must be even (the parsing network's two outputs read half each), not "
                   f"{self.hidden_size}")
