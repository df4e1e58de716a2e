"""Compound PCFG (Kim, Dyer & Rush 2019, "Compound Probabilistic Context-Free Grammars for Grammar Induction"):
a PCFG whose rule probabilities come from neural networks over symbol embeddings and, in the compound variant, a
per-sentence latent vector z ~ N(0, I) that makes the grammar sentence-specific while keeping exact inference for
a fixed z.  ``compound: false`` is the paper's *neural PCFG* (no z).

Networks (the paper's section 3, sizes from the authors' train.py):
- rules: π(A → B C) = softmax over all (B, C) ∈ (N ∪ P)² of a linear map of [w_A; z];
- root:  π(S → A) = softmax over A of f_root([w_S; z]);
- terms: π(T → w) = softmax over the vocabulary of f_term([w_T; z]); f = Linear → two residual layers
  (x + ReLU(W2 ReLU(W1 x))) → Linear, as the authors' ``ResidualLayer``;
- inference network q(z | x) = N(μ, diag σ²): word embeddings → BiLSTM → max-pool over positions (``pooling``) →
  one linear map to (μ, log σ²).
Every weight matrix is Xavier-uniform initialised, as the authors' train.py does.

Loss (the engine's ``likelihood`` objective, hook :meth:`CPCFG.neg_elbo`): per sentence the negative ELBO
−(log p(x | z) − KL(q(z|x) ‖ N(0, I))) with one reparameterised sample of z while training; z = μ in evaluation
(``eval_z: sample`` draws it instead, from a fixed seed).  log p(x | z) is exact (the inside algorithm of
:mod:`.chart`).  Without z it is −log p(x).  The objective reports the summed negative ELBO and the number of
words, so ``dev_ppl`` = exp(Σ −ELBO / Σ words).  The ELBO is a lower bound on log p(x), so with a sampled z
(training, ``eval_z: sample``) the figure is an unbiased single-sample estimate of an upper bound on the model's
perplexity; with z = μ (``eval_z: mean``) it is the plug-in value — less noisy, not guaranteed a bound; for the
neural PCFG it is the exact perplexity.  It counts the n words of each sentence, not the n + 1 of the
authors' code (which adds an implicit </s>), so for the same model it reads higher than theirs.  Sentences of
one word have no derivation under this grammar (every derivation covers ≥ 2 words): they are skipped in the
loss and the counts, as in the authors' code.

Parsing gives constituency only (``ParseScores.distances``): the Viterbi derivation's bracketing (``decode:
viterbi``, the authors' eval.py) or the minimum-Bayes-risk bracketing from posterior span marginals (``decode:
mbr``), both with z = μ; the binary tree is encoded as split distances that the shared tree builder turns back
into exactly that tree.  No dependency output: the grammar's nonterminals carry no head, and any head rule added
here would be a choice of ours, not the model's — ``parse --format conllu`` is the shared one-line refusal.

Differences from the authors' code: the inside pass is batched over sentences and over all spans of one width
(their loop runs over every span and split in Python); sentences of different lengths share a batch (they batch
equal lengths only), so the BiLSTM reads each sentence's real words only (``models/layers/bilstm.py``: one
direction at a time on the CPU, the states of a packed sequence) and the pooling ignores padding; ``<pad>`` and
``<mask>`` are never generated (their vocabulary has no such symbols; a literal ``<mask>`` in the input is read as
an unknown word); the loss is averaged over sentences as
theirs, but reported per word without </s>.
"""

from __future__ import annotations

import torch
from torch import nn

from depinduce.data.vocab import Vocab
from depinduce.models.base import Induces, ParseScores
from depinduce.models.contracts import LikelihoodBackend
from depinduce.models.cpcfg.chart import Grammar, best_span_tree, inside, span_gradients, split_distances
from depinduce.models.cpcfg.config import CPCFGConfig
from depinduce.models.layers.bilstm import bidirectional_states

EVAL_Z_SEED = 20190701  # eval_z: sample draws from this seed at every call, so dev losses are comparable


class ResidualLayer(nn.Module):
    """x + ReLU(W2 ReLU(W1 x)): the paper's residual block of the root and terminal MLPs."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.lin1 = nn.Linear(dim, dim)
        self.lin2 = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin2(torch.relu(self.lin1(x)))) + x


def _mlp(in_dim: int, dim: int, out_dim: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(in_dim, dim), ResidualLayer(dim), ResidualLayer(dim), nn.Linear(dim, out_dim))


def gaussian_kl(mean: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(mean, diag exp(logvar)) ‖ N(0, I)) per row."""
    return 0.5 * (logvar.exp() + mean.pow(2) - 1.0 - logvar).sum(-1)


class CPCFG(LikelihoodBackend):
    """Compound (or, with ``compound: false``, neural) PCFG over words; binary constituency trees."""

    name = "cpcfg"
    description = ("Compound PCFG (Kim et al. 2019): neural PCFG with a per-sentence latent, trained by the ELBO "
                   "(compound=false: the neural PCFG); constituency")
    induces = Induces(dependency=False, constituency=True)
    default_recipes = {"cpu": "cpcfg-ptb-cpu", "cuda": "cpcfg-ptb"}
    config_class = CPCFGConfig

    def __init__(self, config: CPCFGConfig, vocab: Vocab) -> None:
        super().__init__(config, vocab)
        z_dim = config.z_dim if config.compound else 0
        s = config.state_dim
        self.n_symbols = config.nt + config.t
        self.root_emb = nn.Parameter(torch.empty(1, s))
        self.nt_emb = nn.Parameter(torch.empty(config.nt, s))
        self.t_emb = nn.Parameter(torch.empty(config.t, s))
        self.rule_mlp = nn.Linear(s + z_dim, self.n_symbols ** 2)
        self.root_mlp = _mlp(s + z_dim, s, config.nt)
        self.term_mlp = _mlp(s + z_dim, s, len(vocab))
        if config.compound:
            self.enc_emb = nn.Embedding(len(vocab), config.word_dim)
            self.enc_rnn = nn.LSTM(config.word_dim, config.lstm_dim, batch_first=True, bidirectional=True)
            self.enc_out = nn.Linear(2 * config.lstm_dim, 2 * config.z_dim)
        for parameter in self.parameters():
            if parameter.dim() > 1:
                nn.init.xavier_uniform_(parameter)
        # never generated: padding and the masked-LM symbol (unknown words are ordinary terminals)
        never = torch.zeros(len(vocab), dtype=torch.bool)
        never[[vocab.pad_index, vocab.mask_index]] = True
        self.register_buffer("never_generated", never, persistent=False)

    # ------------------------------------------------------------------------------------------ networks

    def posterior(self, tokens: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """q(z | x): mean and log-variance (B, z_dim) from the BiLSTM states pooled over the real positions."""
        lengths = mask.sum(-1)
        states = bidirectional_states(self.enc_rnn, self.enc_emb(tokens), mask)
        real = mask.unsqueeze(-1)
        if self.config.pooling == "max":
            pooled = states.masked_fill(~real, float("-inf")).amax(1)
        else:
            pooled = (states * real).sum(1) / lengths.clamp(min=1).unsqueeze(-1)
        params = self.enc_out(pooled)
        return params[:, : self.config.z_dim], params[:, self.config.z_dim:]

    def _latent(self, tokens: torch.Tensor, mask: torch.Tensor, *, sample: bool
                ) -> tuple[torch.Tensor | None, torch.Tensor]:
        """z (B, z_dim) — a reparameterised sample of q(z|x) or its mean — and the KL per sentence (zeros without
        z; z is then None)."""
        if not self.config.compound:
            return None, tokens.new_zeros(tokens.shape[0], dtype=self.root_emb.dtype)
        mean, logvar = self.posterior(tokens, mask)
        kl = gaussian_kl(mean, logvar)
        if not sample:
            return mean, kl
        if self.training:
            noise = torch.randn_like(mean)
        else:  # eval_z: sample — the same draws at every evaluation
            generator = torch.Generator(device=mean.device).manual_seed(EVAL_Z_SEED)
            noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        return mean + (0.5 * logvar).exp() * noise, kl

    def grammar(self, tokens: torch.Tensor, mask: torch.Tensor, z: torch.Tensor | None) -> Grammar:
        """The PCFG's log-probabilities for this batch: one grammar per sentence given z, else one shared."""
        groups = 1 if z is None else z.shape[0]

        def with_z(embedding: torch.Tensor) -> torch.Tensor:  # (K, s) → (G, K, s [+ z])
            expanded = embedding.unsqueeze(0).expand(groups, -1, -1)
            if z is None:
                return expanded
            return torch.cat([expanded, z.unsqueeze(1).expand(-1, embedding.shape[0], -1)], dim=-1)

        root = torch.log_softmax(self.root_mlp(with_z(self.root_emb)).squeeze(1), dim=-1)  # (G, NT)
        rules = torch.log_softmax(self.rule_mlp(with_z(self.nt_emb)), dim=-1)
        rules = rules.view(groups, self.config.nt, self.n_symbols, self.n_symbols)
        vocab_logits = self.term_mlp(with_z(self.t_emb)).masked_fill(self.never_generated, float("-inf"))
        emission = torch.log_softmax(vocab_logits, dim=-1)  # (G, T, V)
        # padding reads a finite score it never uses; a literal <mask> in the input is read as an unknown word
        words = tokens.masked_fill(~mask | (tokens == self.vocab.mask_index), self.vocab.unk_index)
        if groups == 1:
            terms = emission[0].t()[words]  # (B, N, T)
        else:
            terms = emission.transpose(1, 2).gather(1, words.unsqueeze(-1).expand(-1, -1, self.config.t))
        return Grammar(root, rules, terms, mask.sum(-1))

    # ------------------------------------------------------------------------------------------ training

    def neg_elbo(self, tokens: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per sentence (B,): the negative ELBO −(log p(x | z) − KL) (−log p(x) without z), 0 for sentences of
        fewer than two words; and the words each sentence contributes to perplexity (0 for those)."""
        sample = self.training or self.config.eval_z == "sample"
        z, kl = self._latent(tokens, mask, sample=sample)
        log_px = inside(self.grammar(tokens, mask, z))
        lengths = mask.sum(-1)
        scored = lengths >= 2
        loss = torch.where(scored, kl - log_px, torch.zeros_like(log_px))
        return loss, torch.where(scored, lengths, torch.zeros_like(lengths))

    # ------------------------------------------------------------------------------------------ parsing

    def tree_spans(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, N+1, N+1) 0/1: the spans of each sentence's tree under ``decode``, with z = μ."""
        with torch.no_grad():
            z, _ = self._latent(tokens, mask, sample=False)
            grammar = self.grammar(tokens, mask, z)
        if self.config.decode == "mbr":
            return best_span_tree(span_gradients(grammar, "log"), grammar.lengths)
        # float64: in float32 the best derivations of a long sentence are often within round-off of each other
        # (about 1e-5 in a log-probability of -300), so the chosen tree would depend on the summation order
        exact = Grammar(grammar.root.double(), grammar.rules.double(), grammar.terms.double(), grammar.lengths)
        spans = torch.cat([span_gradients(part, "max") for part in self._viterbi_groups(exact)], dim=0)
        return spans.to(torch.promote_types(grammar.root.dtype, torch.float32))  # 0/1, in the model's dtype

    def _viterbi_groups(self, grammar: Grammar) -> list[Grammar]:
        """The batch cut into runs of sentences whose max-product chart stays under ``viterbi_memory_mb``."""
        batch, n_words = grammar.terms.shape[:2]
        nt, t = self.config.nt, self.config.t
        # the largest max-product intermediates (chart._combine_max): (spans, splits, NT, NT) for two nonterminal
        # children, (spans, NT, X, Y) after the splits, at most (spans, NT, T, T) where both children are words
        splits = max(((n_words - w + 1) * (w - 3) for w in range(4, n_words + 1)), default=0)
        per_sentence = max(splits * nt ** 2, n_words * nt * max(nt, t) ** 2) * grammar.terms.element_size()
        size = max(1, int(self.config.viterbi_memory_mb * 2 ** 20 // max(per_sentence, 1)))
        if size >= batch:
            return [grammar]
        shared = grammar.root.shape[0] == 1
        parts = []
        for start in range(0, batch, size):
            rows = slice(start, start + size)
            parts.append(Grammar(grammar.root if shared else grammar.root[rows],
                                 grammar.rules if shared else grammar.rules[rows],
                                 grammar.terms[rows], grammar.lengths[rows]))
        return parts

    def score_tensors(self, tokens: torch.Tensor, mask: torch.Tensor) -> list[ParseScores]:
        """Split distances of each sentence's binary tree (constituency only, see the module docstring)."""
        spans = self.tree_spans(tokens, mask).cpu()
        return [ParseScores(distances=split_distances(spans[b], n))
                for b, n in enumerate(mask.sum(-1).tolist())]
