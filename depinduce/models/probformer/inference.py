"""Mean-field inference in the Probabilistic Transformer's CRF, exactly as docs/models-reference.md states it.

Variables: a latent label Z_i ∈ {1..d} per word and, in each channel c of C, a head H^c_i over the other words
(and ROOT in the root variant).  Unary score of Z_i = a: x_i[a], the word's embedding row.  Ternary score of
(H^c_i = j, Z_i = a, Z_j = b): T[k(i, j)][a, b, c] with the distance bucket k of :func:`bucket_index`.

Asynchronous updates (paper section 2.3.2), ``n_iter`` times, starting from q_z = x::

    Q_z      = softmax(q_z)                                         rows of padding words are 0
    F[c,i,j] = Σ_{a,b} Q_z[i,a] Q_z[j,b] T[k(i,j)][a,b,c]
    Q_h[c,i,·] = softmax_j(d · F[c,i,j])                            diagonal and padding columns −1e9, then 0
    G[i,a]   = Σ_{c,j} Q_h[c,i,j] Σ_b Q_z[j,b] T[k(i,j)][a,b,c]      i as the dependent
             + Σ_{c,j} Q_h[c,j,i] Σ_b Q_z[j,b] T[k(j,i)][b,a,c]      i as the head
    q_z      = x + G

The factor d on the head logits is the paper's message weight λ_H = 1/d (section 2.3.3, appendix A.5; the label
messages keep λ_Z = 1), as the authors' code applies it.  Dropout (rate ``dropout``) is applied to q_z after every
update — so also to the final q_z, the contextual representation the output layer reads — and to the head
marginals Q_h (after their softmax) before they send messages, as docs/models-reference.md states it and as the authors'
asynchronous branch does (``async_update = true``, every configuration of theirs).  Only their synchronous branch,
which depinduce does not implement, drops the head logits instead.

Root variant (paper section 2.3.5): a ROOT node with its own latent label Z_R ∈ {1..d_root}, Q_R uniform at
first, and a ternary factor T_root[a, e, c] on (H^c_i = ROOT, Z_i = a, Z_R = e).  Each iteration adds ROOT as
head option 0 with logit d · F_root[c, i], F_root[c,i] = Σ_{a,e} Q_z[i,a] Q_R[e] T_root[a,e,c]; word i receives
Σ_c Q_h[c,i,ROOT] Σ_e Q_R[e] T_root[a,e,c]; and Z_R, a label variable updated with the words' labels, gets
q_R[e] = Σ_{c,i} Q_h[c,i,ROOT] Σ_a Q_z[i,a] T_root[a,e,c] (no unary score), then dropout as q_z gets it
(``root_dropout``, the authors' choice; drawn after q_z's, in their order).  The final q_R is the sentence
representation.  T_root has its own form (``root_decomposition``), independent of the words' buckets.

Every step is a batched tensor operation over the whole batch, all words and all channels: the only Python loops
are over the ``n_iter`` iterations and the 2·(t+1) distance buckets.  Each bucket k has its rank projections
P_k = Q_z·U_k, S_k = Q_z·V_k (:mod:`depinduce.models.probformer.factors`); the buckets of offsets 1..t are
diagonal bands of the (T, T) pair matrix, handled by shifted element-wise products, and only the two buckets
beyond t use dense (B, C, T, T) products masked to their pairs (:func:`pair_scores`, :func:`pair_messages`).
The (B, T, T, d) tensors of a direct implementation never exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from depinduce.models.layers.dropout import apply_dropout
from depinduce.models.probformer.config import ProbFormerConfig
from depinduce.models.probformer.factors import FACTORS, RootFactor

# Logit of an impossible head (itself, padding): finite, so a row without any possible head stays NaN-free.
_IMPOSSIBLE = -1e9


def bucket_index(width: int, threshold: int, device: torch.device | None = None) -> torch.Tensor:
    """(T, T) long: the distance bucket k(i, j) of dependent i and head j, −1 on the diagonal.

    Head on the right (j > i): k = min(j − i, t + 1) − 1, i.e. 0..t; head on the left:
    k = t + 1 + min(i − j, t + 1) − 1, i.e. t+1..2t+1.  Offsets 1..t have their own scores, every farther offset
    shares the last one of its side.
    """
    index = torch.arange(width, device=device)
    offset = index[None, :] - index[:, None]
    right = offset.clamp(max=threshold + 1) - 1
    left = threshold + (-offset).clamp(max=threshold + 1)
    return torch.where(offset > 0, right, torch.where(offset < 0, left, torch.full_like(offset, -1)))


def _band(matrix: torch.Tensor, offset: int) -> torch.Tensor:
    """The entries [i, i + offset] of the last two axes (a view), i over the rows where that column exists."""
    return matrix.diagonal(offset, dim1=-2, dim2=-1)


def _far_mask(width: int, threshold: int, side: str, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """(T, T) 0/1 mask of the pairs beyond the threshold: heads at offset ≥ t+1 on the right or on the left."""
    ones = torch.ones(width, width, dtype=dtype, device=device)
    return ones.triu(threshold + 1) if side == "right" else ones.tril(-(threshold + 1))


def pair_scores(proj_p: Sequence[torch.Tensor], proj_s: Sequence[torch.Tensor], threshold: int) -> torch.Tensor:
    """F[c, i, j] = Σ_r P_k[c, i, r] S_k[c, j, r] with k = k(i, j), (B, C, T, T), zero on the diagonal.

    The buckets of offsets 1..t are diagonal bands: a row-wise dot product of P_k with S_k shifted by the offset
    (B·C·T·R work, no T × T product); only the two buckets beyond t take a dense product, masked to their pairs."""
    width = proj_p[0].size(-2)
    t = threshold
    terms = []
    for offset in range(1, min(t, width - 1) + 1):
        right, left = offset - 1, t + offset
        # head on the right: (i, i + o), i = 0..T−o−1;  head on the left: (i, i − o), i = o..T−1
        terms.append(torch.diag_embed(torch.linalg.vecdot(proj_p[right][..., : width - offset, :],
                                                          proj_s[right][..., offset:, :]), offset=offset))
        terms.append(torch.diag_embed(torch.linalg.vecdot(proj_p[left][..., offset:, :],
                                                          proj_s[left][..., : width - offset, :]), offset=-offset))
    if width > t + 1:
        for k, side in ((t, "right"), (2 * t + 1, "left")):
            far = _far_mask(width, t, side, proj_p[k].dtype, proj_p[k].device)
            terms.append(torch.matmul(proj_p[k], proj_s[k].transpose(-1, -2)) * far)
    if not terms:  # a one-word batch: no pairs at all
        batch, channels = proj_p[0].shape[:2]
        return proj_p[0].new_zeros(batch, channels, width, width)
    return torch.stack(terms).sum(dim=0) if len(terms) > 1 else terms[0]


def pair_messages(heads: torch.Tensor, proj_p: Sequence[torch.Tensor], proj_s: Sequence[torch.Tensor],
                  threshold: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The coefficients of the label messages on P and S, per bucket (each (B, C, T, R') like P_k):

    on P_k (word i as the dependent): Σ_j Q_h[c, i, j] [k(i, j) = k] S_k[c, j, ·];
    on S_k (word i as the head):      Σ_j Q_h[c, j, i] [k(j, i) = k] P_k[c, j, ·].

    Band buckets are shifted element-wise products, the two far buckets masked dense products (as
    :func:`pair_scores`)."""
    width = heads.size(-1)
    t = threshold
    grad_p: list[torch.Tensor | None] = [None] * len(proj_p)
    grad_s: list[torch.Tensor | None] = [None] * len(proj_p)
    for offset in range(1, min(t, width - 1) + 1):
        right, left = offset - 1, t + offset
        short = width - offset
        band = _band(heads, offset).unsqueeze(-1)  # Q_h[c, i, i+o], i = 0..T−o−1
        grad_p[right] = F.pad(band * proj_s[right][..., offset:, :], (0, 0, 0, offset))
        grad_s[right] = F.pad(band * proj_p[right][..., :short, :], (0, 0, offset, 0))
        band = _band(heads, -offset).unsqueeze(-1)  # Q_h[c, i, i−o], i = o..T−1
        grad_p[left] = F.pad(band * proj_s[left][..., :short, :], (0, 0, offset, 0))
        grad_s[left] = F.pad(band * proj_p[left][..., offset:, :], (0, 0, 0, offset))
    if width > t + 1:
        for k, side in ((t, "right"), (2 * t + 1, "left")):
            masked = heads * _far_mask(width, t, side, heads.dtype, heads.device)
            grad_p[k] = torch.matmul(masked, proj_s[k])
            grad_s[k] = torch.matmul(masked.transpose(-1, -2), proj_p[k])
    # buckets without any pair in this batch's width
    grad_p = [g if g is not None else torch.zeros_like(p) for g, p in zip(grad_p, proj_p)]
    grad_s = [g if g is not None else torch.zeros_like(p) for g, p in zip(grad_s, proj_p)]
    return grad_p, grad_s  # type: ignore[return-value]


@dataclass
class Marginals:
    """What inference gives for a padded batch.

    ``q_z`` (B, T, d): the final unnormalised label scores (the contextual representations).  ``heads``
    (B, C, T, T): the last iteration's head marginals Q_h[c, i, j] (row i = dependent; zero on the diagonal and at
    padding); ``root`` (B, C, T): Q_h[c, i, ROOT] in the root variant, else None (then each real row of ``heads``
    sums to 1 when the sentence has two words or more; with ROOT, ``root`` + the row sums to 1).  ``q_root``
    (B, d_root): the root label's final unnormalised scores (the sentence representation), else None.
    """

    q_z: torch.Tensor
    heads: torch.Tensor
    root: torch.Tensor | None = None
    q_root: torch.Tensor | None = None
    trace: list[dict[str, torch.Tensor]] = field(default_factory=list)


class MeanField(nn.Module):
    """The CRF's ternary scores and the mean-field iterations over them (the network of the backend)."""

    def __init__(self, config: ProbFormerConfig) -> None:
        super().__init__()
        self.config = config
        self.factors = FACTORS[config.decomposition](config.d, config.n_channels, config.n_buckets, config.rank)
        self.root_factor = (
            RootFactor(config.root_decomposition, config.d, config.root_labels, config.n_channels, config.rank)
            if config.root else None
        )

    def squared_norms(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """‖T‖²_F of the words' ternary scores, and ‖T_root‖²_F of the root tensor (None without ROOT)."""
        root = self.root_factor.tensor().pow(2).sum() if self.root_factor is not None else None
        return self.factors.squared_norm(), root

    def forward(self, x: torch.Tensor, mask: torch.Tensor, *, record: bool = False) -> Marginals:
        """Inference for unary scores ``x`` (B, T, d) and the real-word ``mask`` (B, T).

        ``record`` keeps every iteration's intermediate tensors in ``Marginals.trace`` (for tests and analysis:
        ``Q_z``, ``F``, ``Q_h``, ``G``, ``q_z`` and, with ROOT, ``F_root``, ``Q_h_root``, ``q_root``)."""
        config = self.config
        batch, width, _ = x.shape
        eye = torch.eye(width, dtype=torch.bool, device=x.device)
        allowed = (mask[:, None, :, None] & mask[:, None, None, :]) & ~eye  # (B, 1, T, T)
        weights = self.factors.weights()
        root_tensor = self.root_factor.tensor() if self.root_factor is not None else None
        q_root = x.new_zeros(batch, config.root_labels) if root_tensor is not None else None  # softmax: uniform
        # under train.compile the compiler's partition of the graph decides what backward keeps: a checkpoint's
        # saved random state (dropout) would keep the step out of CUDA graphs
        recompute = (config.recompute and self.training and torch.is_grad_enabled() and not record
                     and not torch.compiler.is_compiling())
        q_z = x
        trace: list[dict[str, torch.Tensor]] = []
        heads = root = None
        for _ in range(config.n_iter):
            step = (x, q_z, q_root, mask, allowed, root_tensor, *weights)
            if recompute:
                q_z, q_root, heads, root = checkpoint(self._iteration, *step, use_reentrant=False)
            else:
                q_z, q_root, heads, root = self._iteration(*step, trace=trace if record else None)
        assert heads is not None  # n_iter >= 1 (checked by the config)
        return Marginals(q_z=q_z, heads=heads, root=root, q_root=q_root, trace=trace)

    def _iteration(self, x: torch.Tensor, q_z: torch.Tensor, q_root: torch.Tensor | None, mask: torch.Tensor,
                   allowed: torch.Tensor, root_tensor: torch.Tensor | None,
                   *weights: torch.Tensor, trace: list[dict[str, torch.Tensor]] | None = None,
                   ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
        """One asynchronous update: heads from the current labels, then labels (and the root label) from the new
        heads.  Returns the new q_z, the new q_root (or None), and the head marginals before dropout."""
        d = self.config.d
        p = self.config.dropout
        t = self.config.distance_threshold
        q = torch.softmax(q_z, dim=-1) * mask[..., None]  # (B, T, d)
        proj_p, proj_s = self.factors.project(q, weights)  # K × (B, C, T, R)
        scores = pair_scores(proj_p, proj_s, t)  # F (B, C, T, T)
        logits = (scores * d).masked_fill(~allowed, _IMPOSSIBLE)
        root_scores = root_marginal = label_root = None
        if root_tensor is not None:
            assert q_root is not None
            label_root = torch.einsum("aec,be->bac", root_tensor, torch.softmax(q_root, dim=-1))  # (B, d, C)
            root_scores = torch.matmul(q, label_root).transpose(1, 2)  # F_root (B, C, T)
            joint = torch.cat([(root_scores * d).unsqueeze(-1), logits], dim=-1).softmax(dim=-1)
            joint = joint * torch.cat([mask[:, None, :, None], allowed], dim=-1)
            root_marginal, heads = joint[..., 0], joint[..., 1:]
            dropped = apply_dropout(joint, p, self.training)
            dropped_root, dropped_heads = dropped[..., 0], dropped[..., 1:]
        else:
            heads = logits.softmax(dim=-1) * allowed
            dropped_heads = apply_dropout(heads, p, self.training)
        grad_p, grad_s = pair_messages(dropped_heads, proj_p, proj_s, t)
        messages = self.factors.back_project(grad_p, grad_s, weights)  # G (B, T, d)
        new_root = None
        if root_tensor is not None:
            assert label_root is not None
            messages = messages + torch.matmul(dropped_root.transpose(1, 2), label_root.transpose(1, 2))
            pooled = torch.matmul(q.transpose(1, 2), dropped_root.transpose(1, 2))  # (B, d, C)
            new_root = torch.einsum("bac,aec->be", pooled, root_tensor)
        new_q_z = apply_dropout(x + messages, p, self.training)
        if new_root is not None and self.config.root_dropout:
            new_root = apply_dropout(new_root, p, self.training)
        if trace is not None:
            step = {"Q_z": q, "F": scores, "Q_h": heads, "G": messages, "q_z": new_q_z}
            if root_tensor is not None:
                step.update(F_root=root_scores, Q_h_root=root_marginal, q_root=new_root)
            trace.append(step)
        return new_q_z, new_root, heads, root_marginal
