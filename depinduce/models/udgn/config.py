"""UDGN hyperparameters; the defaults are the paper's PTB setting (Shen et al. 2022, appendix A.1).

The paper's ablations (its Tables 4 and 8) are options here, so each can be trained from a recipe:
``gates: false`` (no gate g: every head passes its message through unfiltered), ``competition: sigmoid`` (each
head's controller weight is an independent sigmoid, StructFormer's non-competitive choice, instead of a softmax
over the heads), ``relative_bias: false`` (no left/right bias per head) and ``activation: identity`` (the values
are not squashed by tanh).  ``n_heads`` is the ablation of its Figure 4.

Two switches choose between the authors' code (the defaults) and depinduce's earlier choices, which had no
reason of their own but are what the CPU recipes' measured results were trained with:

- ``dgn_dropout``: ``twice`` (the authors') drops a layer's concatenated messages before its output projection
  and again the projection's output before the residual sum; ``once`` only the first.
- ``init``: ``authors`` — one Xavier-uniform bound over the whole [q, k, v, g] projection (fan-out 4·N·d), the
  left/right biases uniform in ±0.1, the parser's child/parent projection Xavier-uniform with a zero bias;
  ``depinduce`` — Xavier per q, k, v, g block (a bound √((H + 4Nd)/(H + Nd)) ≈ 1.73× larger at the paper's
  sizes), zero left/right biases (the layer starts as the ``relative_bias: false`` ablation), and
  ``nn.Linear``'s default initialisation for the parser projection.

One numerical constant differs from the authors' code:

- ``graph_floor``: the authors weight the controller by exp(log(m + 1e-6)), so every real pair (i, j), the
  word itself included, passes at least 1e-6 of its controller weight; depinduce's default 0.0 weights by m
  itself (equation 11), so the diagonal and pairs the parser rules out pass nothing.  ``1.0e-6`` (the paper
  recipe) is the authors' function; the two differ far above round-off: 4e-6 in the states and 1.4e-6 in the
  masked-LM loss of a freshly initialised paper-size network (float64), 6e-6 and 1.8e-5 measured on a trained one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from depinduce.models.config_checks import ConfigChecks


@dataclass
class UDGNConfig:
    """Network shape and regularisation (optimisation settings live in the recipe, not here).

    ``hidden_size`` is the width of the word embedding and of the residual stream between DGN layers;
    ``n_heads`` × ``head_size`` is the width of the messages inside a layer (8 × 128 = 1024 in the paper, twice
    the hidden size).  The parser has its own embedding (``hidden_size`` wide) and a BiLSTM of
    ``parser_layers`` layers with ``parser_hidden_size`` units per direction.  ``dropout`` is applied to the
    embeddings, between and after the BiLSTM layers, to each layer's concatenated messages (with
    ``dgn_dropout: twice`` also to its projected output) and before the output layer; ``dropatt`` drops
    controller weights a_ijk, i.e. head k for the pair (i, j).  ``dgn_dropout``, ``init`` and ``graph_floor``:
    see above.

    ``recompute_lstm`` and ``recompute_heads`` are implementation choices that leave the results unchanged: CPU
    training reruns each BiLSTM layer in backward instead of keeping oneDNN's workspace (~190 MB per layer for a
    4,096-token batch at 256 units), and each DGN layer's heads from its projection instead of keeping their
    intermediates (about twice the projection).  ``auto`` (the default) recomputes only when keeping would take
    more than a quarter of the memory the system has available (``layers/memory.py``); ``true``/``false``
    force it.
    """

    hidden_size: int = 512
    n_layers: int = 8
    n_heads: int = 8
    head_size: int = 128
    parser_layers: int = 3
    parser_hidden_size: int = 512
    dropout: float = 0.2
    dropatt: float = 0.1
    gates: bool = True
    competition: Literal["softmax", "sigmoid"] = "softmax"
    relative_bias: bool = True
    activation: Literal["tanh", "identity"] = "tanh"
    dgn_dropout: Literal["twice", "once"] = "twice"
    init: Literal["authors", "depinduce"] = "authors"
    graph_floor: float = 0.0
    recompute_lstm: bool | str = "auto"
    recompute_heads: bool | str = "auto"

    def __post_init__(self) -> None:
        check = ConfigChecks("udgn", self)
        check.positive_ints("hidden_size", "n_layers", "n_heads", "head_size", "parser_layers", "parser_hidden_size")
        check.probabilities("dropout", "dropatt", "graph_floor")
        check.booleans("gates", "relative_bias")
        check.choices("competition", ("softmax", "sigmoid"))
        check.choices("activation", ("tanh", "identity"))
        check.choices("dgn_dropout", ("twice", "once"))
        check.choices("init", ("authors", "depinduce"))
        check.recompute_switches("recompute_lstm", "recompute_heads")
