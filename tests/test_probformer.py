"""Probabilistic Transformer: mean-field inference against a naive loop implementation of docs/models-reference.md
(every
decomposition, the ROOT variant), padding invariance, gradients and recomputation, the regularizer, the authors'
settings (ROOT switches, decoders, summed chunk losses), parse scores and channels, configs and recipes, and
train → parse → eval end to end."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from depinduce.cli.main import cli
from depinduce.data.vocab import Vocab
from depinduce.errors import DepinduceError
from depinduce.models.base import ParseScores
from depinduce.models.neural import pad_batch
from depinduce.models.probformer import ProbFormer, ProbFormerConfig
from depinduce.models.probformer.inference import bucket_index
from depinduce.models.probformer.model import head_scores
from depinduce.structures.decode import decode_heads
from depinduce.structures.dependency import tree_problem
from depinduce.structures.mst import chu_liu_edmonds
from depinduce.structures.root_reweighting import root_reweighted_tree, root_reweighting_constant
from depinduce.training.config import load_recipe, resolve_config
from depinduce.training.objectives import MaskedLM
from training_support import REPO, make_data

F64 = torch.float64
TINY = {"d": 8, "n_channels": 3, "n_iter": 2, "rank": 4, "distance_threshold": 1}


def tiny_model(**overrides: object) -> ProbFormer:
    torch.manual_seed(0)
    return ProbFormer(ProbFormerConfig(**{**TINY, **overrides}), Vocab([f"w{i}" for i in range(40)]))


def batch_of(*rows: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    return pad_batch(rows, 0)


# ----------------------------------------------------------------------------------- the naive reference


def _softmax(values: list[float]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


def _bucket(i: int, j: int, t: int) -> int:
    """Distance bucket of dependent i and head j: offsets 1..t, then > t, head right first, then head left."""
    offset = j - i
    return min(offset, t + 1) - 1 if offset > 0 else t + min(-offset, t + 1)


def reference_inference(x: list[list[float]], T: list, t: int, n_iter: int, root_T: list | None = None) -> list[dict]:
    """docs/models-reference.md's mean-field steps for one sentence, with explicit loops over i, j, a, b, c (and e, the
    root label).  ``T[k][a][b][c]``, ``root_T[a][e][c]``.  Returns each iteration's F, Q_h, G, q_z (and root)."""
    n, d = len(x), len(x[0])
    C = len(T[0][0][0])
    q_z = [row[:] for row in x]
    d_root = len(root_T[0]) if root_T is not None else 0
    q_root = [0.0] * d_root
    steps = []
    for _ in range(n_iter):
        Q = [_softmax(row) for row in q_z]
        Q_root = _softmax(q_root) if root_T is not None else []
        F = [[[0.0] * n for _ in range(n)] for _ in range(C)]
        for c, i, j in itertools.product(range(C), range(n), range(n)):
            if i == j:
                continue
            k = _bucket(i, j, t)
            F[c][i][j] = sum(Q[i][a] * Q[j][b] * T[k][a][b][c] for a in range(d) for b in range(d))
        F_root = [[0.0] * n for _ in range(C)]
        if root_T is not None:
            for c, i in itertools.product(range(C), range(n)):
                F_root[c][i] = sum(Q[i][a] * Q_root[e] * root_T[a][e][c] for a in range(d) for e in range(d_root))
        H = [[[0.0] * n for _ in range(n)] for _ in range(C)]
        H_root = [[0.0] * n for _ in range(C)]
        for c, i in itertools.product(range(C), range(n)):
            others = [j for j in range(n) if j != i]
            logits = [d * F[c][i][j] for j in others]
            if root_T is not None:
                probs = _softmax([d * F_root[c][i]] + logits)
                H_root[c][i] = probs[0]
                probs = probs[1:]
            elif others:
                probs = _softmax(logits)
            else:
                probs = []
            for j, prob in zip(others, probs):
                H[c][i][j] = prob
        G = [[0.0] * d for _ in range(n)]
        for i, a in itertools.product(range(n), range(d)):
            total = 0.0
            for c, j in itertools.product(range(C), range(n)):
                if j == i:
                    continue
                k_dep, k_head = _bucket(i, j, t), _bucket(j, i, t)
                for b in range(d):
                    total += H[c][i][j] * Q[j][b] * T[k_dep][a][b][c]  # i the dependent, j its head
                    total += H[c][j][i] * Q[j][b] * T[k_head][b][a][c]  # j the dependent, i its head
            if root_T is not None:
                for c, e in itertools.product(range(C), range(d_root)):
                    total += H_root[c][i] * Q_root[e] * root_T[a][e][c]
            G[i][a] = total
        if root_T is not None:
            q_root = [sum(H_root[c][i] * Q[i][a] * root_T[a][e][c]
                          for c in range(C) for i in range(n) for a in range(d)) for e in range(d_root)]
        q_z = [[x[i][a] + G[i][a] for a in range(d)] for i in range(n)]
        steps.append({"F": F, "Q_h": H, "G": G, "q_z": q_z, "Q_h_root": H_root, "q_root": q_root})
    return steps


def reconstructed(model: ProbFormer) -> tuple[torch.Tensor, torch.Tensor | None]:
    """T[k, a, b, c] and T_root[a, e, c] from the raw parameters by the paper's formulas (explicit sums over r),
    independently of the module's own ``tensor()``."""
    factors, config = model.mean_field.factors, model.config
    K, d, C, R = config.n_buckets, config.d, config.n_channels, config.rank
    T = torch.zeros(K, d, d, C, dtype=F64)
    root_T = None
    root = model.mean_field.root_factor
    if config.decomposition == "uv":
        for r in range(R):
            T += factors.U[:, :, r].permute(0, 2, 1)[:, :, None, :] * factors.V[:, :, r].permute(0, 2, 1)[:, None]
    elif config.decomposition == "uvw":
        for r in range(R):
            T += (factors.U[:, r][:, :, None, None] * factors.V[:, r][:, None, :, None]
                  * factors.W[:, :, r][:, None, None, :])
    else:
        T = factors.T.permute(0, 2, 3, 1).clone()
    if root is None:
        return T.detach(), None
    if config.root_decomposition == "uv":  # the root tensor's own form, independent of the words'
        root_T = sum(root.U[:, r].T[:, None, :] * root.V[:, r].T[None] for r in range(R))
    elif config.root_decomposition == "uvw":
        root_T = sum(root.U[r][:, None, None] * root.V[r][None, :, None] * root.W[:, r][None, None] for r in range(R))
    else:
        root_T = root.T
    return T.detach(), root_T.detach()


# every word form without ROOT; with ROOT, the root tensor in the authors' default form (full) and in another one
VARIANTS = [{"decomposition": dec, "root": False} for dec in ("uv", "uvw", "none")] + [
    {"decomposition": dec, "root": True, "root_decomposition": root_dec}
    for dec, root_dec in (("uv", "none"), ("uv", "uv"), ("uvw", "none"), ("uvw", "uv"), ("none", "none"),
                          ("none", "uvw"))
]


def _variant_id(variant: dict) -> str:
    return variant["decomposition"] + (f"-root-{variant['root_decomposition']}" if variant["root"] else "")


@pytest.mark.parametrize("variant", VARIANTS, ids=_variant_id)
def test_mean_field_follows_the_design_equations(variant: dict) -> None:
    model = tiny_model(d=3, n_channels=2, rank=2, root_size=2, dropout=0.0, **variant).double().eval()
    for param in model.parameters():  # larger scores than the initialisation: sharper, more telling marginals
        torch.nn.init.normal_(param, std=0.7)
    tokens, mask = batch_of([4, 5, 6, 7], [8, 9, 10], [11])  # width 4 > t + 1: the far buckets are used
    with torch.no_grad():
        found = model.infer(tokens, mask, record=True)
        x = model.embedding(tokens)
    T, root_T = reconstructed(model)
    assert torch.allclose(model.mean_field.factors.tensor().double(), T)
    for b, n in enumerate((4, 3, 1)):
        want = reference_inference(x[b, :n].tolist(), T.tolist(), 1, 2, None if root_T is None else root_T.tolist())
        for step, (got, ref) in enumerate(zip(found.trace, want)):
            where = f"sentence {b}, iteration {step + 1}"
            assert torch.allclose(got["F"][b, :, :n, :n], torch.tensor(ref["F"], dtype=F64)), where
            assert torch.allclose(got["Q_h"][b, :, :n, :n], torch.tensor(ref["Q_h"], dtype=F64)), where
            assert torch.allclose(got["G"][b, :n], torch.tensor(ref["G"], dtype=F64)), where
            assert torch.allclose(got["q_z"][b, :n], torch.tensor(ref["q_z"], dtype=F64)), where
            if variant["root"]:
                assert torch.allclose(got["Q_h_root"][b, :, :n], torch.tensor(ref["Q_h_root"], dtype=F64)), where
                assert torch.allclose(got["q_root"][b], torch.tensor(ref["q_root"], dtype=F64)), where
        assert torch.equal(found.q_z[b], found.trace[-1]["q_z"][b])
    # padding rows and columns, and a one-word sentence (no possible head), carry no head mass
    assert torch.all(found.heads[1, :, 3:] == 0) and torch.all(found.heads[1, :, :, 3:] == 0)
    assert torch.all(found.heads[2] == 0)


def test_buckets_split_offsets_by_side_and_threshold() -> None:
    index = bucket_index(6, 2)
    assert index[0].tolist() == [-1, 0, 1, 2, 2, 2]  # heads to the right: offsets 1, 2, then ≥ 3
    assert index[5].tolist() == [5, 5, 5, 4, 3, -1]  # heads to the left: offsets 1, 2 → 3, 4; ≥ 3 → 5
    assert all(index[i, j] == _bucket(i, j, 2) for i in range(6) for j in range(6) if i != j)


# ------------------------------------------------------------------------------- masking, gradients, regularizer


@pytest.mark.parametrize("root", [False, True])
def test_a_sentence_scores_the_same_alone_and_padded_in_a_batch(root: bool) -> None:
    model = tiny_model(root=root, distance_threshold=2).eval()
    short = [5, 9, 13, 2, 7]
    alone_tokens, alone_mask = batch_of(short)
    batch_tokens, batch_mask = batch_of(list(range(3, 14)), short, [4])
    n = len(short)
    with torch.no_grad():
        alone, in_batch = model.infer(alone_tokens, alone_mask), model.infer(batch_tokens, batch_mask)
    assert torch.allclose(alone.q_z[0], in_batch.q_z[1, :n], atol=1e-5)
    assert torch.allclose(alone.heads[0], in_batch.heads[1, :, :n, :n], atol=1e-6)
    assert torch.all(in_batch.heads[1, :, n:] == 0) and torch.all(in_batch.heads[1, :, :, n:] == 0)
    if root:
        assert torch.allclose(alone.root[0], in_batch.root[1, :, :n], atol=1e-6)
        assert torch.allclose(alone.q_root[0], in_batch.q_root[1], atol=1e-5)
        assert torch.allclose(in_batch.root[2, :, 0], torch.ones(3, dtype=in_batch.root.dtype))  # one word: ROOT


@pytest.mark.parametrize("decomposition", ["uv", "uvw", "none"])
def test_the_masked_lm_loss_reaches_every_ternary_factor(decomposition: str) -> None:
    model = tiny_model(decomposition=decomposition, root=True, root_decomposition=decomposition, dropout=0.1).train()
    tokens, mask = batch_of(list(range(3, 12)), list(range(20, 26)))
    objective = MaskedLM(0.4)
    inputs = objective.prepare(tokens, mask, generator=torch.Generator().manual_seed(0))
    objective.compute(model, **inputs).loss.backward()
    for name, param in model.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name
    names = {name for name, _ in model.named_parameters()}
    expected = {"uv": {"U", "V"}, "uvw": {"U", "V", "W"}, "none": {"T"}}[decomposition]
    assert {f"mean_field.factors.{p}" for p in expected} <= names
    assert {f"mean_field.root_factor.{p}" for p in expected} <= names


def test_recomputing_iterations_in_backward_changes_nothing() -> None:
    tokens, mask = batch_of(list(range(3, 12)), list(range(20, 26)))
    results = []
    for recompute in (False, True):
        model = tiny_model(recompute=recompute, dropout=0.3, root=True).train()
        torch.manual_seed(7)  # the same dropout masks in both runs (checkpointing replays the RNG)
        hidden = model.encode(tokens, mask)
        (hidden * torch.linspace(-1, 1, hidden.numel()).view_as(hidden)).sum().backward()
        results.append((hidden.detach(), {n: p.grad for n, p in model.named_parameters()}))
    (h_plain, g_plain), (h_recomputed, g_recomputed) = results
    assert torch.allclose(h_plain, h_recomputed, atol=1e-6)
    compared = 0
    for name, grad in g_plain.items():
        if name.startswith("output."):  # not used by encode
            continue
        assert torch.allclose(grad, g_recomputed[name], atol=1e-5), name
        compared += 1
    assert compared == len(g_plain) - 2


def test_gradients_of_the_inference_are_exact() -> None:
    model = tiny_model(d=4, n_channels=2, rank=2, root=True, dropout=0.0).double()
    tokens, mask = batch_of([4, 5, 6, 7, 8], [9, 10])
    x = model.embedding(tokens).detach().requires_grad_()
    assert torch.autograd.gradcheck(lambda x: model.mean_field(x, mask).q_z, (x,), fast_mode=True)


@pytest.mark.parametrize("variant", VARIANTS, ids=_variant_id)
def test_regularizer_is_the_weighted_frobenius_norm_of_the_reconstructed_tensor(variant: dict) -> None:
    model = tiny_model(ternary_l2=5e-4, **variant).double()
    T, root_T = reconstructed(model)
    norm = T.pow(2).sum().sqrt() + (root_T.pow(2).sum().sqrt() if root_T is not None else 0.0)  # separate terms
    regularizer = model.regularizer()
    assert regularizer is not None
    assert regularizer.item() == pytest.approx(5e-4 * norm.item(), rel=1e-9)
    regularizer.backward()
    assert model.mean_field.factors.parameters().__next__().grad is not None
    assert tiny_model(ternary_l2=0.0).regularizer() is None


# ------------------------------------------------------------------------------- the authors' ROOT variant


def test_root_label_scores_are_dropped_after_every_update_as_the_authors_do() -> None:
    tokens, mask = batch_of([4, 5, 6, 7, 8], [9, 10])
    found = {}
    for root_dropout in (True, False):
        model = tiny_model(root=True, root_dropout=root_dropout, dropout=0.5, n_iter=1, recompute=False).train()
        torch.manual_seed(3)  # the same draws for q_z and Q_h: q_R's mask is drawn last, after q_z's
        found[root_dropout] = model.infer(tokens, mask)
    assert torch.equal(found[True].q_z, found[False].q_z) and torch.equal(found[True].heads, found[False].heads)
    dropped, kept = found[True].q_root, found[False].q_root
    zeroed = dropped == 0
    assert 0 < int(zeroed.sum()) < zeroed.numel()  # p = 0.5: some labels dropped, some kept
    assert torch.equal(dropped[~zeroed], 2 * kept[~zeroed])  # the kept ones scaled by 1 / (1 − p)
    assert ProbFormerConfig().root_dropout is True
    evaluated = tiny_model(root=True, dropout=0.5, n_iter=1).eval()
    assert torch.all(evaluated.infer(tokens, mask).q_root != 0)  # no dropout outside training


def test_root_tensor_takes_its_own_form_independently_of_the_words() -> None:
    def parameters(model: ProbFormer, part: str) -> dict[str, tuple[int, ...]]:
        return {name.rsplit(".", 1)[1]: tuple(p.shape) for name, p in model.named_parameters() if part in name}

    d, d_root, C, R = TINY["d"], 5, TINY["n_channels"], TINY["rank"]
    default = tiny_model(decomposition="uv", root=True, root_size=d_root)  # the authors' default: full T_root
    assert parameters(default, "root_factor") == {"T": (d, d_root, C)}
    assert set(parameters(default, "mean_field.factors")) == {"U", "V"}
    mixed = tiny_model(decomposition="none", root=True, root_size=d_root, root_decomposition="uvw")
    assert parameters(mixed, "root_factor") == {"U": (R, d), "V": (R, d_root), "W": (C, R)}
    assert set(parameters(mixed, "mean_field.factors")) == {"T"}
    assert ProbFormerConfig().root_decomposition == "none"


@pytest.mark.parametrize("root_norm, value, root_grad", [("separate", 3.5, 0.25), ("joint", 2.5, 0.15)])
def test_root_regularizer_is_a_separate_term_as_the_authors_trainer_adds_it(root_norm: str, value: float,
                                                                            root_grad: float) -> None:
    # full tensors of known entries: T all 1 over 4 buckets × 1 channel × 2 × 2 → ‖T‖ = 4; T_root all 1.5 over
    # 2 × 2 × 1 → ‖T_root‖ = 3.  separate: 0.5 · (4 + 3) = 3.5;  joint: 0.5 · √(16 + 9) = 2.5.
    model = tiny_model(d=2, n_channels=1, distance_threshold=1, decomposition="none", root=True, root_size=2,
                       root_norm=root_norm, ternary_l2=0.5).double()
    with torch.no_grad():
        model.mean_field.factors.T.fill_(1.0)
        model.mean_field.root_factor.T.fill_(1.5)
    regularizer = model.regularizer()
    assert regularizer is not None and regularizer.item() == pytest.approx(value, rel=1e-12)
    regularizer.backward()
    # d/dT_root: 0.5 · 1.5 / ‖T_root‖ (separate) or 0.5 · 1.5 / √(‖T‖² + ‖T_root‖²) (joint)
    assert torch.allclose(model.mean_field.root_factor.T.grad, torch.full((2, 2, 1), root_grad, dtype=F64))
    assert ProbFormerConfig().root_norm == "separate"


# ------------------------------------------------------------------------------------- the authors' decoders


def own(name: str, matrix: torch.Tensor, model: type[ProbFormer] | ProbFormer = ProbFormer) -> list[int]:
    return model.own_decoders[name].decode(ParseScores(heads=matrix))


def test_authors_argmax_takes_each_words_most_probable_word_head_never_root() -> None:
    # head marginals (row = dependent): word 1 splits .5/.5 between words 2 and 3; words 2 and 3 point at word 1
    probs = torch.tensor([[0.0, 0.5, 0.5], [0.9, 0.0, 0.1], [0.9, 0.1, 0.0]])
    matrix = head_scores(probs, None)
    assert own("probformer-argmax", matrix) == [2, 1, 1]  # the tie goes to the leftmost head; no ROOT at all
    assert decode_heads(matrix, "argmax") == [0, 1, 1]  # depinduce's: word 1 receives the most mass (share .6)
    assert own("probformer-argmax", head_scores(torch.zeros(1, 1), None)) == [0]  # one word: ROOT, not itself


def test_authors_tree_decoders_sum_probabilities_with_root_at_zero() -> None:
    probs = torch.tensor([[0.0, 0.3, 0.5, 0.2],
                          [0.3, 0.0, 0.1, 0.6],
                          [0.1, 0.8, 0.0, 0.1],
                          [0.2, 0.3, 0.5, 0.0]])
    matrix = head_scores(probs, None)
    # Each word's best head: 1→3 (.5), 2→4 (.6), 3→2 (.8), 4→3 (.5), total 2.4, with the cycle 2→4→3→2.  ROOT
    # scores 0, so the root word loses its best head: rooting word 4 (−.5) leaves the tree 1→3→2→4 (1.9, best);
    # word 2 (−.6): 1.8; word 3 (−.8): 1.6; word 1 (−.5) leaves the cycle.  1→3 crosses 2→4: not projective.
    assert own("probformer-nonprojective", matrix) == [3, 4, 2, 0]
    # projective, root 4 with 2→4 and 3→2: word 1 takes word 2 (.3; 1→3 would cross 2→4): 1.7, the best
    assert own("probformer-projective", matrix) == [2, 4, 2, 0]
    # depinduce's decoders (log-probabilities, ROOT scored by received mass) choose other trees here
    assert decode_heads(matrix, "mst") == [3, 0, 2, 3] and decode_heads(matrix, "eisner") == [2, 0, 2, 3]


def test_root_reweighting_lowers_root_arcs_until_one_root_is_best() -> None:
    scores = torch.tensor([[0.0, 0.0, 0.0],
                           [5.0, -math.inf, 1.0],
                           [4.0, 1.0, -math.inf]])
    assert chu_liu_edmonds(scores, single_root=False) == [0, 0]  # both words on ROOT: 9
    assert root_reweighting_constant(scores) == 1 + 2 * (5.0 - 1.0)  # the finite entries' spread
    assert root_reweighted_tree(scores) == [0, 1]  # 5 + 1 beats 1 + 4
    assert torch.isinf(scores[1, 1])  # never modified


def test_a_root_model_decodes_with_its_root_marginals() -> None:
    # rows: P(ROOT), then the words (diagonal 0)
    probs = torch.tensor([[0.1, 0.0, 0.7, 0.2],
                          [0.1, 0.8, 0.0, 0.1],
                          [0.5, 0.1, 0.4, 0.0]])
    matrix = head_scores(probs[:, 1:], probs[:, 0])
    model = tiny_model(root=True)
    assert own("probformer-argmax", matrix, model) == [2, 1, 0]  # word 3's best head is ROOT
    # with ROOT's marginals: root 3 (.5) + 2→1 (.8) + 1→3 (.2) = 1.5 beats root 1 (.1 + .8 + .4 = 1.3)
    assert own("probformer-nonprojective", matrix, model) == [3, 1, 0]
    assert own("probformer-projective", matrix, model) == [3, 1, 0]
    # the same matrix read as the paper's model (ROOT at 0): root 1 (.8 + .4 = 1.2) beats root 3 (1.0)
    assert own("probformer-nonprojective", matrix) == own("probformer-projective", matrix) == [0, 1, 2]
    assert set(model.own_decoders) == set(ProbFormer.own_decoders) == {
        "probformer-argmax", "probformer-nonprojective", "probformer-projective"}


# ------------------------------------------------------------------------ the authors' summed chunk losses


def _loss_and_grads(model: ProbFormer, objective: MaskedLM, rows: list[list[int]], masks: list[list[bool]]):
    model.zero_grad()
    tokens, mask = batch_of(*rows)
    inputs = objective.prepare(tokens, mask, fixed=[torch.tensor(m) for m in masks])
    out = objective.compute(model, **inputs)
    out.loss.backward()
    return out, {name: p.grad.clone() for name, p in model.named_parameters()}


def test_summed_chunk_losses_give_four_times_the_mean_gradient() -> None:
    model = tiny_model(dropout=0.0, ternary_l2=0.05).double().train()
    # 8 sentences in 4 runs of 2 (consecutive), each run with 3 masked words, so the 4 runs' mean losses
    # sum to 4 × the batch mean: Σ_k nll_k / 3 + 4·R = 4 · (Σ_k nll_k / 12 + R), the regularizer R included.
    rows = [[4, 5, 6], [7, 8], [9, 10, 11, 12], [13], [14, 15], [16, 17, 18, 19, 20], [21, 22, 23], [24, 25]]
    masks = [[True, False, True], [True, False], [False, True, True, False], [True], [True, False],
             [False, True, True, False, False], [True, True, False], [False, True]]
    mean, mean_grads = _loss_and_grads(model, MaskedLM(0.3), rows, masks)
    summed, summed_grads = _loss_and_grads(model, MaskedLM(0.3, chunks=4), rows, masks)
    assert summed.loss.item() == pytest.approx(4 * mean.loss.item(), rel=1e-12)
    assert torch.equal(summed.count, mean.count) and summed.nll_sum.item() == pytest.approx(mean.nll_sum.item())
    regularizer = model.regularizer()
    assert regularizer is not None and 4 * regularizer.item() > 0.01 * summed.loss.item()  # it weighs in
    for name, grad in mean_grads.items():
        assert torch.allclose(summed_grads[name], 4 * grad, rtol=1e-9, atol=1e-15), name


def test_chunks_are_runs_of_consecutive_sentences_each_with_its_own_mean_and_regularizer() -> None:
    model = tiny_model(dropout=0.0, ternary_l2=0.05).double().train()
    rows = [[4, 5, 6], [7, 8], [9, 10, 11, 12], [13, 14], [15, 16, 17]]
    masks = [[True, False, True], [True, False], [False, True, True, True], [True, False], [False, True, False]]
    whole, _ = _loss_and_grads(model, MaskedLM(0.3, chunks=2), rows, masks)
    first, _ = _loss_and_grads(model, MaskedLM(0.3), rows[:3], masks[:3])  # 3 + 2 sentences
    second, _ = _loss_and_grads(model, MaskedLM(0.3), rows[3:], masks[3:])
    assert whole.loss.item() == pytest.approx(first.loss.item() + second.loss.item(), rel=1e-12)
    assert whole.nll_sum.item() == pytest.approx(first.nll_sum.item() + second.nll_sum.item(), rel=1e-12)
    few, _ = _loss_and_grads(model, MaskedLM(0.3, chunks=4), rows[:2], masks[:2])  # fewer sentences than chunks
    one = [_loss_and_grads(model, MaskedLM(0.3), [r], [m])[0].loss.item() for r, m in zip(rows[:2], masks[:2])]
    assert few.loss.item() == pytest.approx(sum(one), rel=1e-12)
    model.eval()  # evaluation: the batch's mean, chunks or not (only the NLL sum is reported there)
    with torch.no_grad():
        tokens, mask = batch_of(*rows)
        inputs = MaskedLM(0.3).prepare(tokens, mask, fixed=[torch.tensor(m) for m in masks])
        assert MaskedLM(0.3, chunks=2).compute(model, **inputs).loss == MaskedLM(0.3).compute(model, **inputs).loss


# ---------------------------------------------------------------------------------------- parsing and channels


def test_scores_average_the_channels_and_root_from_received_mass() -> None:
    model = tiny_model().eval()
    tokens, mask = batch_of([4, 8, 15, 16, 23, 5], [30, 7], [9])
    heads, root = model.head_marginals(tokens, mask)
    assert root is None
    scores = model.score_tensors(tokens, mask)
    for b, n in enumerate((6, 2, 1)):
        matrix = scores[b].heads
        assert matrix.shape == (n + 1, n + 1)
        assert torch.all(matrix[0] == -math.inf) and torch.all(matrix[1:, 1:].diagonal() == -math.inf)
        mean = heads[b, :, :n, :n].mean(dim=0)
        off = ~torch.eye(n, dtype=torch.bool)
        assert torch.allclose(matrix[1:, 1:][off].exp(), mean[off], atol=1e-6)
        share = mean.sum(dim=0) / n if n > 1 else torch.ones(1)
        assert torch.allclose(matrix[1:, 0].exp(), share, atol=1e-6)
        tree = decode_heads(matrix, "mst")
        assert tree_problem(tree) is None and tree.count(0) == 1
        assert len(decode_heads(matrix, "argmax")) == n


def test_root_variant_scores_rows_as_distributions_over_root_and_words() -> None:
    model = tiny_model(root=True).eval()
    tokens, mask = batch_of([4, 8, 15, 16, 23], [30])
    heads, root = model.head_marginals(tokens, mask)
    for b, n in enumerate((5, 1)):
        matrix = model.score_tensors(tokens, mask)[b].heads
        assert torch.allclose(matrix[1:].logsumexp(dim=-1), torch.zeros(n), atol=1e-5)
        assert torch.allclose(matrix[1:, 0].exp(), root[b, :, :n].mean(dim=0), atol=1e-6)
    representation = model.sentence_representation(tokens, mask)
    assert representation.shape == (2, model.config.root_labels)
    with pytest.raises(DepinduceError, match="without the ROOT node"):
        tiny_model().sentence_representation(tokens, mask)


def test_select_channel_uses_that_channel_and_rejects_out_of_range() -> None:
    model = tiny_model(root=True).eval()
    tokens, mask = batch_of([4, 8, 15, 16, 23])
    heads, root = model.head_marginals(tokens, mask)
    average = model.score_tensors(tokens, mask)[0].heads
    model.select_channel(2)
    second = model.score_tensors(tokens, mask)[0].heads
    off = ~torch.eye(5, dtype=torch.bool)
    assert torch.allclose(second[1:, 1:][off].exp(), heads[0, 1][off], atol=1e-6)
    assert torch.allclose(second[1:, 0].exp(), root[0, 1], atol=1e-6)
    assert not torch.allclose(second, average)
    model.select_channel(None)
    assert torch.equal(model.score_tensors(tokens, mask)[0].heads, average)
    for bad in (0, 4, -1):
        with pytest.raises(DepinduceError) as caught:
            model.select_channel(bad)
        assert "out of range" in str(caught.value) and "1..3" in str(caught.value) and "\n" not in str(caught.value)
    # one inference gives every view exactly as parse_scores gives it with that channel selected
    words = [["w1", "w5", "w12", "w13", "w20"], ["w3", "w3"]]
    per_channel = model.channel_parse_scores(words)
    assert [len(views) for views in per_channel] == [4, 4]  # channels 1..3, then the average
    for view, channel in enumerate((1, 2, 3, None)):
        model.select_channel(channel)
        for sentence, scores in enumerate(model.parse_scores(words)):
            assert torch.equal(per_channel[sentence][view].heads, scores.heads)


# ------------------------------------------------------------------------------------------ configs and recipes


def test_config_errors_are_one_line() -> None:
    for values, problem in (
        ({"d": 0}, "d must be a positive integer"),
        ({"n_iter": 1.5}, "n_iter must be a positive integer"),
        ({"decomposition": "cp"}, "decomposition must be one of uv, uvw, none, not 'cp'"),
        ({"dropout": 1.0}, "dropout must be in [0, 1)"),
        ({"root": "yes"}, "root must be true or false"),
        ({"root_size": 0}, "root_size must be a positive integer or null"),
        ({"ternary_l2": -1}, "ternary_l2 must be a non-negative number"),
        ({"root_dropout": "yes"}, "root_dropout must be true or false"),
        ({"root_decomposition": "same"}, "root_decomposition must be one of uv, uvw, none, not 'same'"),
        ({"root_norm": "sum"}, "root_norm must be one of separate, joint, not 'sum'"),
    ):
        with pytest.raises(DepinduceError) as caught:
            ProbFormerConfig(**values)
        assert problem in str(caught.value) and "\n" not in str(caught.value)
    defaults = ProbFormerConfig()
    assert (defaults.d, defaults.n_channels, defaults.n_iter, defaults.distance_threshold) == (384, 16, 5, 3)
    assert (defaults.decomposition, defaults.rank, defaults.dropout, defaults.ternary_l2) == ("uv", 64, 0.15, 5e-4)
    assert defaults.n_buckets == 8 and defaults.root is False


@pytest.mark.parametrize("name", ["probformer-ptb.yaml", "probformer-ptb-cpu.yaml"])
def test_recipes_load_and_build(name: str) -> None:
    recipe = load_recipe(REPO / "depinduce" / "recipes" / name)
    config = resolve_config(model_name=None, model_config_class=ProbFormerConfig, recipe=recipe, where=name)
    model = ProbFormer.from_config(config.model_config, Vocab([f"w{i}" for i in range(50)]))
    factors = model.mean_field.factors
    train = config.train.flat()  # as the recipe writes them
    if name == "probformer-ptb.yaml":
        assert (model.config.d, model.n_channels, model.config.rank, model.config.dropout) == (384, 16, 64, 0.15)
        assert factors.U.shape == (8, 16, 64, 384)
        assert (train["lr"], train["weight_decay"], train["select"]) == (1e-3, 1.4e-6, "dev_ppl")
        # the authors' effective gradient scale: 4 summed chunk means per ~64-sentence batch, clipped at 5
        assert (train["loss_chunks"], train["batch_tokens"], train["clip"]) == (4, 1440, 5.0)
        assert train["decoder"] == "probformer-argmax"
        assert (model.config.root_dropout, model.config.root_decomposition, model.config.root_norm) == (
            True, "none", "separate")
    else:
        assert train["select"] == "dev_uda" and train["lr"] == 1e-3
        assert factors.U.shape == (8, model.n_channels, model.config.rank, model.config.d)


# ------------------------------------------------------------------------------------------------- end to end


def test_train_parse_and_eval_end_to_end(tmp_path: Path) -> None:
    data = make_data(tmp_path / "data", n_train=60, n_dev=12)
    run = tmp_path / "run"
    runner = CliRunner()
    shrink = [f"model_config.{key}={value}" for key, value in TINY.items()]
    trained = runner.invoke(cli, [
        "train", "--recipe", str(REPO / "depinduce" / "recipes" / "probformer-ptb-cpu.yaml"), "--data", str(data),
        "--out", str(run), "--quiet", "--threads", "1", *itertools.chain.from_iterable(("--set", s) for s in shrink),
        "--set", "train.epochs=1", "--set", "train.batch_tokens=200", "--set", "train.eval_every=0",
    ])
    assert trained.exit_code == 0, trained.output
    assert (run / "model.pt").is_file() and "dev_uda" in (run / "metrics.jsonl").read_text()

    gold = str(data / "dev.conllu")
    pred = tmp_path / "pred.conllu"
    for decoder in ("mst", "argmax", "probformer-argmax", "probformer-nonprojective", "probformer-projective"):
        parsed = runner.invoke(cli, ["parse", "--model", str(run), "--input-format", "conllu", "--decoder", decoder,
                                     "--quiet", gold])
        assert parsed.exit_code == 0, parsed.output
        pred.write_text(parsed.stdout)
        scored = runner.invoke(cli, ["eval", "--gold", gold, "--pred", str(pred), "--json"])
        assert scored.exit_code == 0, scored.output
        metrics = json.loads(scored.stdout)["metrics"]
        assert 0.0 <= metrics["dda"] <= metrics["uda"] <= 100.0
        if decoder in ("mst", "probformer-nonprojective", "probformer-projective"):
            assert metrics["well_formed"] == 100.0

    channel = runner.invoke(cli, ["parse", "--model", str(run), "--channel", "2", "--quiet", "-"],
                            input="The dog saw a cat near the river.\n")
    assert channel.exit_code == 0, channel.output
    assert len([line for line in channel.stdout.splitlines() if line and not line.startswith("#")]) == 9
    for bad in ("0", "4"):
        refused = runner.invoke(cli, ["parse", "--model", str(run), "--channel", bad, "--quiet", "-"], input="a b\n")
        assert refused.exit_code == 2 and refused.output.strip().endswith("has channels 1..3")
        assert len(refused.output.strip().splitlines()) == 1
    no_channels = runner.invoke(cli, ["parse", "--model", "right-branching", "--channel", "1", "--quiet", "-"],
                                input="a b\n")
    assert no_channels.exit_code == 2 and "has no head channels" in no_channels.output
    assert len(no_channels.output.strip().splitlines()) == 1

