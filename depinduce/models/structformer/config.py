"""StructFormer hyperparameters: the network defaults are the paper's PTB setting (Shen et al. 2021, section 5);
the switches ``margin`` and ``tree_ties`` default to depinduce's choices, their paper settings are in the paper
recipe (``recipes/structformer-ptb.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass

from depinduce.models.config_checks import ConfigChecks

MARGINS = ("sentence", "batch")
TREE_TIES = ("binary", "nary")


@dataclass
class StructFormerConfig:
    """Network shape and regularisation (optimisation settings live in the recipe, not here).

    ``pos_emb`` adds a learned absolute position embedding (the paper's runs use one); positions past
    ``max_positions - 1`` share the last row, so parsing a longer sentence degrades gracefully instead of failing.
    ``leaky_slope`` is the FFN's LeakyReLU slope (torch's default, as in the authors' code).
    ``recompute_ffn`` is an implementation choice, not a hyperparameter, and leaves the results unchanged: each
    layer's (tokens × ff_size) activation is recomputed in backward instead of kept, 4·hidden_size floats less
    per token and layer (0.27 GB for the paper configuration's 4096-token batches) for one more product per
    layer (about 10% of a 4 × 256 step on CPU).  ``auto`` (the default) recomputes only when keeping them would take more than a
    quarter of the memory the system has available (``layers/memory.py``); ``true``/``false`` force it.
    ``dropatt`` (attention dropout) defaults to 0, the authors' ``main.py`` default, which their training command
    keeps (their model class's own default, 0.1, is never used).

    Switches between depinduce's choices and the authors' code (paper setting second; the paper recipe uses it):
    ``margin``: the distance calibration margin (``parser.calibrate_distances``) is the largest over each
    ``sentence`` (default: a sentence's structure depends on the sentence alone) or over the whole ``batch``
    (the authors' forward pass, training and dev loss).  Parsing always calibrates per sentence: the authors'
    test-time parse runs one sentence at a time, where the two coincide.
    ``tree_ties``: the constituency tree from the distances splits a span at its largest distance, ties to the
    leftmost maximum (``binary``, default: every backend's distance tree is binary under one rule) or at every
    tied maximum at once (``nary``, the authors' ``build_tree``).  The dependency side of their tie rule, every
    word of the greatest height a root, is the ``structformer-argmax`` decoder.
    """

    hidden_size: int = 512
    n_layers: int = 8
    n_heads: int = 8
    ff_size: int = 2048
    dropout: float = 0.1
    dropatt: float = 0.0
    n_parser_layers: int = 3
    conv_size: int = 9
    pos_emb: bool = True
    max_positions: int = 512
    leaky_slope: float = 0.01
    recompute_ffn: bool | str = "auto"
    margin: str = "sentence"
    tree_ties: str = "binary"

    def __post_init__(self) -> None:
        check = ConfigChecks("structformer", self)
        check.positive_ints("hidden_size", "n_layers", "n_heads", "ff_size", "conv_size", "max_positions")
        check.need(isinstance(self.n_parser_layers, int) and not isinstance(self.n_parser_layers, bool)
                   and self.n_parser_layers >= 0,
                   f"n_parser_layers must be a non-negative integer, not {self.n_parser_layers!r}")
        check.need(self.hidden_size % self.n_heads == 0,
                   f"hidden_size ({self.hidden_size}) must be divisible by n_heads ({self.n_heads})")
        check.need(self.conv_size % 2 == 1, f"conv_size must be odd (same padding), not {self.conv_size}")
        check.probabilities("dropout", "dropatt")
        check.booleans("pos_emb")
        check.recompute_switches("recompute_ffn")
        check.choices("margin", MARGINS)
        check.choices("tree_ties", TREE_TIES)
