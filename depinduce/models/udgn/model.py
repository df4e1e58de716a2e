"""UDGN (Unsupervised Dependency Graph Network, Shen et al. 2022): a masked LM whose layers pass messages along a
soft undirected dependency graph that its own parser predicts.

The parser (``parser.py``: embedding → BiLSTM → bilinear head scores) gives each word a distribution p over the
words of its sentence; m = p ∨ pᵀ (probabilistic OR, zero diagonal) weights every pair's messages in the DGN
layers (``dgn.py``), whose heads compete for each pair.  The masked-LM gradient reaches the parser only through
m, which is how the grammar is induced.  Trained with the engine's masked-LM objective; dependency output only
(``parse`` derives constituents from the subtrees of the decoded tree).

Network: word embedding → dropout → ``n_layers`` DGN layers → LayerNorm → dropout → output layer tied to the
word embedding (with its own bias), computed only at the masked positions.  No position embedding: the DGN's
left/right bias is the only order information besides the BiLSTM parser's.

Root scoring (``score_tensors``).  The parser's softmax ranges over every word of the sentence *including the
word itself*, as in the authors' code; the self-mass p[i, i] never becomes an edge (m has a zero diagonal), so
it is the probability that word i has no head among the other words.  depinduce scores ROOT → i with exactly
that: column 0 holds log p[i, i], so each row of the (n+1)×(n+1) matrix is a full log-distribution over
{ROOT, the other words}.  ``mst`` then finds the best tree with exactly one root; ``argmax`` takes each word's
best entry, which may give several roots or none.  The paper's figures come from the authors' own decoders,
which ignore p[i, i] (``decoders.py``): ``udgn-tree`` scores every root candidate 0, so that the root is chosen
by the word-to-word scores alone (the word that loses the least by taking no word head), and ``udgn-argmax``
takes each word's most probable other word, so it never gives ROOT.  log p[i, i] also counts how much of word
i's mass the parser, trained through m, keeps off every edge, which is why it is depinduce's ROOT score.
"""

from __future__ import annotations

import torch
from torch import nn

from depinduce.data.vocab import Vocab
from depinduce.models.base import Induces, ParseScores
from depinduce.models.contracts import MaskedLMBackend
from depinduce.models.layers.dropout import apply_dropout
from depinduce.models.layers.memory import limit_onednn_primitive_cache, release_free_heap, should_recompute
from depinduce.models.neural import LinearOutputLayer
from depinduce.models.udgn.config import UDGNConfig
from depinduce.models.udgn.decoders import AUTHORS_DECODERS
from depinduce.models.udgn.dgn import DGNLayer, pair_directions
from depinduce.models.udgn.parser import HeadSelectiveParser, undirected_mask


class UDGN(LinearOutputLayer, MaskedLMBackend):
    """Head-selective BiLSTM parser + Dependency Graph Network trained end to end by masked-LM; gives
    dependencies."""

    name = "udgn"
    description = "UDGN (Shen et al. 2022): masked LM over a parser-predicted soft dependency graph"
    induces = Induces(dependency=True, constituency=False)
    head_probs = "scores"  # the parser's head distribution p, self-mass as ROOT (score_tensors)
    default_recipes = {"cpu": "udgn-ptb-cpu", "cuda": "udgn-ptb"}
    config_class = UDGNConfig
    parser_modules = ("parser",)  # what train.parser_lr applies to
    mixed_precision = True  # train.precision: bf16 (training/precision.py)
    own_decoders = AUTHORS_DECODERS

    def __init__(self, config: UDGNConfig, vocab: Vocab) -> None:
        super().__init__(config, vocab)
        limit_onednn_primitive_cache()  # see layers/memory.py: one cached primitive per batch shape fragments the heap
        hidden = config.hidden_size
        self.embedding = nn.Embedding(len(vocab), hidden)
        self.parser = HeadSelectiveParser(len(vocab), hidden, config.parser_hidden_size, config.parser_layers,
                                          config.dropout, config.recompute_lstm, config.init)
        self.layers = nn.ModuleList(
            DGNLayer(hidden, config.n_heads, config.head_size, config.dropout, config.dropatt, gates=config.gates,
                     competition=config.competition, relative_bias=config.relative_bias,
                     activation=config.activation, dropout_twice=config.dgn_dropout == "twice", init=config.init)
            for _ in range(config.n_layers)
        )
        self.final_norm = nn.LayerNorm(hidden)
        self.output_bias = nn.Parameter(torch.zeros(len(vocab)))
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)

    def head_distribution(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The parser's p (B, T, T): row i is word i's distribution over the words of its sentence (itself
        included), zero at padding."""
        return self.parser.head_distribution(tokens, mask)

    def graph(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The weights (B, T, T) the DGN layers multiply the controller by: m, plus ``graph_floor`` at every real
        key (the authors' log(m + 1e-6) with ``graph_floor: 1.0e-6``; padding keys stay exactly 0)."""
        graph = undirected_mask(self.head_distribution(tokens, mask))
        floor = self.config.graph_floor
        return graph if floor == 0.0 else (graph + floor).masked_fill(~mask[:, None, :], 0.0)

    def _layers(self, tokens: torch.Tensor, mask: torch.Tensor,
                controllers: list[torch.Tensor] | None = None) -> torch.Tensor:
        graph = self.graph(tokens, mask)
        directions = pair_directions(tokens.size(1), tokens.device)
        x = apply_dropout(self.embedding(tokens), self.config.dropout, self.training)
        recompute = self._recompute_heads(x)
        for layer in self.layers:
            x = layer(x, graph, directions, controllers, recompute)
        return x

    def _recompute_heads(self, x: torch.Tensor) -> bool:
        """Whether this step's DGN layers keep only their projections for backward (config ``recompute_heads``;
        ``auto``: only when keeping the rest, about twice the projections, would take a quarter of the
        available memory)."""
        if not (self.training and torch.is_grad_enabled()):
            return True
        config = self.config
        projection = x.size(0) * x.size(1) * (4 if config.gates else 3) * config.n_heads * config.head_size
        return should_recompute(config.recompute_heads, 2 * projection * x.element_size() * config.n_layers)

    def encode(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.training and tokens.device.type == "cpu" and torch.is_grad_enabled():
            # A training step starts here, after the previous one freed its activations and gradients: the
            # moment to hand fragmented heap pages back (layers/memory.py; acts only when the resident set grew).
            release_free_heap()
        return self.final_norm(self._layers(tokens, mask))

    def output_layer(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Dropout, then the output layer tied to the word embedding (with its own bias)."""
        return apply_dropout(hidden, self.config.dropout, self.training), self.embedding.weight, self.output_bias

    def score_tensors(self, tokens: torch.Tensor, mask: torch.Tensor) -> list[ParseScores]:
        """Per sentence of n words: ``heads`` (n+1)×(n+1), row = dependent, column = head: log p[i, j] for word
        heads and log p[i, i] (the word's self-mass, see the module docstring) in column 0; the diagonal and
        row 0 are −inf.  Each dependent's row is a log-distribution (it sums to 1 in probability space)."""
        log_p = self.parser.logits(tokens, mask).log_softmax(dim=-1)
        scores = []
        for b, n in enumerate(mask.sum(dim=-1).tolist()):
            block = log_p[b, :n, :n]
            heads = torch.full((n + 1, n + 1), float("-inf"), dtype=log_p.dtype, device=tokens.device)
            heads[1:, 0] = block.diagonal()
            heads[1:, 1:] = block
            heads[1:, 1:].fill_diagonal_(float("-inf"))
            scores.append(ParseScores(heads=heads))
        return scores

    @torch.no_grad()
    def controller_probabilities(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Every DGN layer's controller â for a padded batch, in eval mode (no dropout), as a
        (B, n_layers, n_heads, T, T) tensor: ``[b, l, k, i, j]`` is the probability that layer l sends the
        information from word j to word i through head k (the paper's â_ijk, equations 10 and 12 — before the
        graph weight m_ij; with ``competition: softmax`` it sums to 1 over k).  Entries whose i or j is padding
        are 0.  For the heads-versus-dependency-labels analysis (the paper's Table 3)."""
        was_training = self.training
        self.eval()
        try:
            controllers: list[torch.Tensor] = []
            self._layers(tokens, mask, controllers)
        finally:
            self.train(was_training)
        pairs = (mask[:, :, None] & mask[:, None, :])[:, None, None]
        return torch.stack(controllers, dim=1).masked_fill(~pairs, 0.0)
