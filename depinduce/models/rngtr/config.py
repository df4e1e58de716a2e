"""RNGTr / SynTr hyperparameters (Mohammadshahi & Henderson 2021; docs/models-reference.md, RNGTr section).

The paper's encoder is BERT-base; depinduce's default is a small transformer trained from scratch (fits a 2-core
CPU budget).  The decoder sizes are the paper's: arc MLP 500, label MLP 100, LeakyReLU 0.1, dropout 0.33.
"""

from __future__ import annotations

from dataclasses import dataclass

from depinduce.models.config_checks import ConfigChecks


@dataclass
class RNGTrConfig:
    """Network shape, regularisation and the refinement schedule (optimisation settings live in the recipe).

    ``iterations`` is T, the number of graph-conditioned refinement passes after the first pass (0 = SynTr alone).
    ``max_positions`` bounds the learned position embedding (ROOT + words); longer sentences are an error.
    """

    hidden_size: int = 256
    n_layers: int = 4
    n_heads: int = 8
    ff_size: int = 1024
    dropout: float = 0.1
    arc_mlp_size: int = 500
    label_mlp_size: int = 100
    mlp_dropout: float = 0.33
    iterations: int = 3
    max_positions: int = 512
    positions: bool = True
    # A local HuggingFace BERT folder (`train --encoder-path DIR`): the encoder starts from its weights and reads
    # word pieces (see bert.py); hidden_size, n_layers, n_heads, ff_size and max_positions then come from it.
    encoder_path: str | None = None
    layer_norm_eps: float = 1e-5
    # Differences from the authors' code (idiap/g2g-transformer), each with the authors' setting available:
    # - updates: one optimiser step per batch on the passes' combined loss (``per_batch``), or one step per
    #   refinement pass (``per_pass``, the authors' trainer: T+1 times more updates at the same learning rate);
    # - first_graph: what the first graph-reading pass reads of the pass before it — its argmax graph (``argmax``,
    #   as the paper describes) or its MST tree (``mst``, the authors' code; see model.py for the stop test);
    # - decode_pass: a sentence that converges at pass t is decoded from pass t (``last``) or from pass t-1
    #   (``previous``, the authors' code: same argmax graph, the MST can differ).
    # - graph_cycles: a 2-cycle of an argmax graph (x the head of y, y the head of x) is read as it is (``keep``)
    #   or both its arcs are left out of the graph the next pass reads (``drop``, the authors' code: their
    #   build_graph_labeled keeps only pairs with one direction); the stop test compares the graphs whole.
    updates: str = "per_batch"
    first_graph: str = "argmax"
    decode_pass: str = "last"
    graph_cycles: str = "keep"

    def __post_init__(self) -> None:
        check = ConfigChecks("rngtr", self)
        check.positive_ints("hidden_size", "n_layers", "n_heads", "ff_size", "arc_mlp_size", "label_mlp_size",
                            "max_positions")
        check.probabilities("dropout", "mlp_dropout")
        check.booleans("positions")
        check.need(self.encoder_path is None or isinstance(self.encoder_path, str),
                   f"encoder_path must be a folder path, not {self.encoder_path!r}")
        check.need(isinstance(self.layer_norm_eps, float) and self.layer_norm_eps > 0,
                   f"layer_norm_eps must be a positive number, not {self.layer_norm_eps!r}")
        check.need(isinstance(self.iterations, int) and not isinstance(self.iterations, bool)
                   and self.iterations >= 0, f"iterations must be a non-negative integer, not {self.iterations!r}")
        for name, allowed in (("updates", ("per_batch", "per_pass")), ("first_graph", ("argmax", "mst")),
                              ("decode_pass", ("last", "previous")), ("graph_cycles", ("keep", "drop"))):
            value = getattr(self, name)
            check.need(value in allowed, f"{name} must be one of {', '.join(allowed)}, not {value!r}")
        check.need(self.hidden_size % self.n_heads == 0,
                   f"hidden_size ({self.hidden_size}) must be a multiple of n_heads ({self.n_heads})")

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.n_heads
