"""StructFormer: parser, calibration, parent distribution, attention kernels, scores and the paper's decoder."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from depinduce.data.vocab import Vocab
from depinduce.models.neural import pad_batch
from depinduce.errors import DepinduceError
from depinduce.models.base import ParseScores
from depinduce.models.layers.dropout import KeptMask, apply_dropout, drop_mask
from depinduce.models.layers.kernels import norm_linear, position_linear
from depinduce.models.structformer import StructFormer, StructFormerConfig
from depinduce.models.structformer.attention import StructFormerLayer, _AttentionCore
from depinduce.models.structformer.parent import parent_distribution
from depinduce.models.structformer.parser import BIG, calibrate_distances
from depinduce.structures.decode import argmax_heads
from depinduce.structures.dependency import tree_problem
from depinduce.structures.joint import dependency_from_distances
from dropout_support import drawn_dropout_masks
from depinduce.structures.mst import chu_liu_edmonds
from depinduce.training.objectives import MaskedLM

pytestmark = pytest.mark.lower_bounds  # torch, quickly (scripts/check_lower_bounds.py)

TINY = {"hidden_size": 16, "n_layers": 2, "n_heads": 4, "ff_size": 32, "conv_size": 3, "max_positions": 64}
F64 = torch.float64


def tiny_model(**overrides: object) -> StructFormer:
    torch.manual_seed(0)
    vocab = Vocab([f"w{i}" for i in range(40)])
    return StructFormer(StructFormerConfig(**{**TINY, **overrides}), vocab)


def naive_parent(d: list[float], h: list[float], s0: float, s1: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The definition, term by term: O(n⁴) loops over (i, l, r, j)."""
    n = len(h)
    dd, hh = torch.tensor(d, dtype=F64), torch.tensor(h, dtype=F64)

    def crosses(i: int, k: int) -> float:
        return float(torch.sigmoid(s0 * (hh[i] - dd[k])))

    parent = torch.zeros(n, n, dtype=F64)
    for i in range(n):
        def left(l: int) -> float:  # P(L_i <= l)
            return 0.0 if l < 0 else min((crosses(i, k) for k in range(l, i)), default=1.0)

        def right(r: int) -> float:  # P(R_i >= r)
            return 0.0 if r >= n else min((crosses(i, k) for k in range(i, r)), default=1.0)

        for l in range(i + 1):
            for r in range(i, n):
                weight = (left(l) - left(l - 1)) * (right(r) - right(r + 1))
                head = torch.softmax(s1 * hh[l : r + 1], dim=0)
                for j in range(l, r + 1):
                    parent[i, j] += weight * head[j - l]
    root = parent.diagonal().clone()
    parent.fill_diagonal_(0.0)
    return parent, root


def padded(rows_d: list[list[float]], rows_h: list[list[float]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Batch tensors as the parser makes them: +BIG after the last word and at padding, −BIG heights at padding."""
    width = max(len(h) for h in rows_h)
    distance = torch.full((len(rows_h), width), BIG, dtype=F64)
    height = torch.full((len(rows_h), width), -BIG, dtype=F64)
    mask = torch.zeros((len(rows_h), width), dtype=torch.bool)
    for b, (d, h) in enumerate(zip(rows_d, rows_h)):
        distance[b, : len(d)] = torch.tensor(d, dtype=F64)
        height[b, : len(h)] = torch.tensor(h, dtype=F64)
        mask[b, : len(h)] = True
    return distance, height, mask


def random_sentence(rng: random.Random, n: int) -> tuple[list[float], list[float]]:
    return [rng.gauss(0, 1.5) for _ in range(n - 1)], [rng.gauss(0, 1.5) for _ in range(n)]


# ---------------------------------------------------------------------------------------------- parent distribution


def test_fast_contraction_equals_the_naive_definition_in_a_padded_batch() -> None:
    rng = random.Random(1)
    sentences = [random_sentence(rng, n) for n in (1, 2, 5, 7)]
    distance, height, mask = padded([d for d, _ in sentences], [h for _, h in sentences])
    s0, s1 = torch.tensor(1.7, dtype=F64), torch.tensor(0.6, dtype=F64)
    parent, root = parent_distribution(distance, height, mask, s0, s1)
    for b, (d, h) in enumerate(sentences):
        n = len(h)
        want_parent, want_root = naive_parent(d, h, 1.7, 0.6)
        assert torch.allclose(parent[b, :n, :n], want_parent, atol=1e-12)
        assert torch.allclose(root[b, :n], want_root, atol=1e-12)
        assert torch.all(parent[b, n:] == 0) and torch.all(parent[b, :, n:] == 0) and torch.all(root[b, n:] == 0)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=12),
    seed=st.integers(min_value=0, max_value=10_000),
    log_s0=st.floats(min_value=-3, max_value=4),
    log_s1=st.floats(min_value=-3, max_value=4),
)
def test_rows_are_sub_probabilities_and_the_rest_is_root(n: int, seed: int, log_s0: float, log_s1: float) -> None:
    rng = random.Random(seed)
    d, h = random_sentence(rng, n)
    distance, height, mask = padded([d], [h])
    s0, s1 = torch.tensor(log_s0, dtype=F64).exp(), torch.tensor(log_s1, dtype=F64).exp()
    parent, root = parent_distribution(distance, height, mask, s0, s1)
    assert torch.all(parent >= 0) and torch.all(root >= 0)
    assert torch.all(parent.sum(-1) <= 1 + 1e-9)
    assert torch.allclose(parent.sum(-1) + root, torch.ones(1, n, dtype=F64), atol=1e-9)


def consistent_structure(rng: random.Random, n: int) -> tuple[list[float], list[float], list[int]]:
    """Distances (distinct even numbers) and heights such that every word sits above the distances inside the
    span where it attaches and below that span's boundaries, with the attachment side chosen at random; returns
    them with the heads built alongside (1-based, 0 = ROOT)."""
    distances = [2.0 * (k + 1) for k in range(n - 1)]
    rng.shuffle(distances)
    heights = [0.0] * n
    heads = [0] * n
    span_head = {i: i for i in range(n)}  # span start -> head
    start_of, end_of = list(range(n)), list(range(n))
    for k in sorted(range(n - 1), key=lambda k: distances[k]):
        left_start, right_end = start_of[k], end_of[k + 1]
        left, right = span_head[left_start], span_head[k + 1]
        winner, loser = (left, right) if rng.random() < 0.5 else (right, left)
        heads[loser] = winner + 1
        heights[loser] = distances[k] + 1.0
        span_head[left_start] = winner
        end_of[left_start], start_of[right_end] = right_end, left_start
    root = span_head[0]
    heights[root] = 2.0 * n + 1.0
    return distances, heights, heads


@pytest.mark.parametrize("seed", range(6))
def test_sharp_temperatures_reproduce_the_joint_algorithm(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(2, 9)
    distances, heights, built = consistent_structure(rng, n)
    expected = dependency_from_distances(distances, heights)
    assert expected == built  # the hand-built structure is the joint algorithm's tree
    distance, height, mask = padded([distances], [heights])
    sharp = torch.tensor(60.0, dtype=F64)
    parent, root = parent_distribution(distance, height, mask, sharp, sharp)
    for i in range(n):
        if expected[i] == 0:
            assert root[0, i] > 0.999 and parent[0, i].sum() < 1e-3
        else:
            assert parent[0, i, expected[i] - 1] > 0.999


def test_a_300_word_sentence_stays_small() -> None:
    n = 300
    torch.manual_seed(0)
    distance = torch.randn(1, n, dtype=F64).index_fill_(1, torch.tensor([n - 1]), BIG).requires_grad_()
    height = torch.randn(1, n, dtype=F64, requires_grad=True)
    mask = torch.ones(1, n, dtype=torch.bool)
    biggest = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal biggest
        biggest = max(biggest, t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        parent, root = parent_distribution(distance, height, mask, torch.tensor(1.0), torch.tensor(1.0))
    (parent.sum() + root.sum()).backward()
    assert biggest <= n * n  # never an n³ tensor kept for backward
    assert torch.isfinite(height.grad).all() and torch.isfinite(distance.grad).all()
    assert torch.allclose(parent.sum(-1) + root, torch.ones(1, n, dtype=F64), atol=1e-9)


def test_extreme_sharpness_stays_finite() -> None:
    distance, height, mask = padded([[0.0, 30.0, -10.0]], [[-40.0, 25.0, 5.0, 50.0]])
    huge = torch.tensor(80.0, dtype=F64)
    parent, root = parent_distribution(distance, height, mask, huge, huge)
    assert torch.isfinite(parent).all() and torch.isfinite(root).all()
    assert torch.all(parent.sum(-1) + root <= 1 + 1e-9)


# ------------------------------------------------------------------------------------------------------ calibration


def test_calibration_margin_is_per_sentence() -> None:
    # Sentence A (d = 3, 5; h = 0, 1, 0.5): the span of word 2 alone has boundaries 5 (left) and the sentence end,
    # so m = min(5 − 0.5, ∞) = 4.5, the largest over its spans (the whole sentence excluded).  Sentence B's
    # largest margin is 100, which must not leak into A as the authors' per-batch maximum would.
    d_a, h_a = [3.0, 5.0], [0.0, 1.0, 0.5]
    distance, height, mask = padded([d_a, [100.0]], [h_a, [0.0, 0.0]])
    calibrated = calibrate_distances(distance.float(), height.float(), mask)
    assert torch.allclose(calibrated[0, :2], torch.tensor([3.0 - 4.5, 5.0 - 4.5]))
    assert torch.allclose(calibrated[1, :1], torch.tensor([0.0]))
    assert calibrated[0, 2] == BIG and calibrated[1, 1] == BIG


def test_calibration_brute_force() -> None:
    rng = random.Random(3)
    d, h = random_sentence(rng, 6)
    distance, height, mask = padded([d], [h])
    n = len(h)
    best = 0.0
    for i in range(n):
        for j in range(i, n):
            if (i, j) == (0, n - 1):
                continue
            hmax = max(h[i : j + 1])
            left = float("inf") if i == 0 else d[i - 1]
            right = float("inf") if j == n - 1 else d[j]
            best = max(best, min(max(left - hmax, 0.0), max(right - hmax, 0.0)))
    calibrated = calibrate_distances(distance, height, mask)
    assert torch.allclose(calibrated[0, : n - 1], torch.tensor(d, dtype=F64) - best)


# ------------------------------------------------------------------------------------------------------------ model


def masked_lm_loss(model: StructFormer, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    masked = mask & (torch.arange(tokens.numel()).view(tokens.shape) % 3 == 0)
    hidden = model.encode(tokens.masked_fill(masked, model.vocab.mask_index), mask)
    return F.cross_entropy(model.output_logits(hidden[masked]), tokens[masked])


def batch_of(*rows: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    return pad_batch(rows, 0)


def test_gradients_reach_the_parser_through_the_masked_lm_loss() -> None:
    model = tiny_model()
    model.train()
    tokens, mask = batch_of(list(range(3, 12)), list(range(20, 26)))
    masked_lm_loss(model, tokens, mask).backward()
    parser = model.parser
    for name, param in [
        *(("conv", conv.weight) for conv in parser.convs),
        ("distance_conv", parser.distance_conv.weight),
        ("distance_out", parser.distance_out.weight),
        ("height_proj", parser.height_proj.weight),
        ("height_out", parser.height_out.weight),
        ("temperatures", model.log_sharpness),
        ("relation mixture", model.relation_logits),
    ]:
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_the_masked_lm_objective_fuses_the_output_layer_with_the_same_loss_and_gradients() -> None:
    """The engine's objective computes the output layer and its loss in one pass (LinearOutputLayer): the same
    loss and gradients, to float rounding, as the logits and F.cross_entropy under autograd."""
    tokens, mask = batch_of(list(range(3, 12)), list(range(20, 26)))
    masked = mask & (torch.arange(tokens.numel()).view(tokens.shape) % 3 == 0)
    results = []
    for fused in (True, False):
        model = tiny_model(dropout=0.0, dropatt=0.0)
        model.train()
        if fused:
            loss = MaskedLM(0.3).compute(model, tokens=tokens, mask=mask, masked=masked).loss
        else:
            loss = masked_lm_loss(model, tokens, mask)
        loss.backward()
        results.append((loss.detach(), {name: p.grad for name, p in model.named_parameters()}))
    (fused_loss, fused_grads), (plain_loss, plain_grads) = results
    assert torch.allclose(fused_loss, plain_loss, rtol=1e-6)
    assert fused_grads["embedding.weight"] is not None and fused_grads["output_bias"] is not None
    for name, grad in plain_grads.items():
        assert grad is not None and torch.allclose(fused_grads[name], grad, rtol=1e-4, atol=1e-7), name


@pytest.mark.parametrize("precision", ["float32", "bf16"])
def test_the_last_layer_at_the_masked_positions_only_gives_the_same_numbers(precision: str) -> None:
    """encode_masked computes the last layer's output projection and feed-forward block at the masked positions
    only, with the dropout masks the whole batch would get there: the same hidden states and gradients as
    encode(...)[masked], dropout on (float32 to rounding; under bfloat16 autocast within its rounding)."""
    tokens, mask = batch_of(list(range(3, 12)), list(range(20, 26)), list(range(5, 17)))
    masked = mask & (torch.arange(tokens.numel()).view(tokens.shape) % 3 == 0)
    inputs = tokens.masked_fill(masked, Vocab.mask_index)
    results = []
    for selected in (False, True):
        model = tiny_model(dropout=0.3, dropatt=0.2, n_layers=3)
        model.train()
        torch.manual_seed(7)  # the same dropout masks
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            hidden = model.encode_masked(inputs, mask, masked) if selected else model.encode(inputs, mask)[masked]
        hidden.float().mul(torch.linspace(-1, 1, hidden.numel()).view(hidden.shape)).sum().backward()
        results.append((hidden.detach().float(), {name: p.grad for name, p in model.named_parameters()}))
    (full, full_grads), (rows, rows_grads) = results
    tolerance = 1e-5 if precision == "float32" else 3e-2
    assert rows.shape == (int(masked.sum()), TINY["hidden_size"])
    assert torch.allclose(rows, full, atol=tolerance)
    assert full_grads.keys() == rows_grads.keys() and full_grads.pop("output_bias") is None  # not reached by encode
    scale = max(grad.abs().max().item() for grad in full_grads.values())
    for name, grad in full_grads.items():
        assert (rows_grads[name] - grad).abs().max().item() <= tolerance * scale, name
    # the dropout masks are the whole batch's: another draw would move the states by far more than rounding
    model = tiny_model(dropout=0.3, dropatt=0.2, n_layers=3)
    model.train()
    torch.manual_seed(8)
    assert not torch.allclose(model.encode_masked(inputs, mask, masked), full, atol=1e-2)


def test_padding_does_not_change_a_sentence() -> None:
    model = tiny_model()
    model.eval()
    short = [5, 9, 13, 2, 7]
    alone_tokens, alone_mask = batch_of(short)
    batch_tokens, batch_mask = batch_of(list(range(3, 14)), short)
    with torch.no_grad():
        hidden_alone = model.encode(alone_tokens, alone_mask)
        hidden_batch = model.encode(batch_tokens, batch_mask)
    n = len(short)
    assert torch.allclose(hidden_alone[0], hidden_batch[1, :n], atol=1e-5)


def test_score_tensors_shapes_and_log_parent_matrix() -> None:
    model = tiny_model()
    tokens, mask = batch_of([4, 8, 15, 16, 23], [42, 7], [9])
    scores = model.score_tensors(tokens, mask)
    structure = model.structure(tokens, mask)
    for b, n in enumerate((5, 2, 1)):
        s = scores[b]
        assert s.heads.shape == (n + 1, n + 1) and s.distances.shape == (n - 1,) and s.heights.shape == (n,)
        assert torch.all(torch.isinf(s.heads[0])) and torch.all(torch.isinf(s.heads[1:, 1:].diagonal()))
        off_diagonal = s.heads[1:, 1:][~torch.eye(n, dtype=torch.bool)]
        assert torch.isfinite(off_diagonal).all() and torch.isfinite(s.heads[1:, 0]).all()
        # ROOT: each row's softmax gives it the sentence-head probability softmax(s1 · height) (parse --probs)
        rows = s.heads[1:].double().softmax(dim=-1)
        s1 = model.log_sharpness.detach()[1].exp().double()
        assert torch.allclose(rows[:, 0], (s1 * structure.height[b, :n].double()).softmax(dim=0), atol=1e-6)
        assert tree_problem(chu_liu_edmonds(s.heads.detach())) is None


def paper_dependency_heads(scores: ParseScores) -> list[int]:
    """The paper's decoder as ``parse --decoder argmax`` runs it: the highest word is the root."""
    return argmax_heads(scores.heads, root=int(scores.heights.argmax()) + 1)


def test_paper_decoder_takes_argmax_parents_and_the_highest_word_as_root() -> None:
    neg = float("-inf")
    heads = torch.tensor(
        [
            [neg, neg, neg, neg],
            [-0.1, neg, -0.5, -3.0],  # word 1: best parent word 2
            [-2.0, -0.2, neg, -0.3],  # word 2: best parent word 1 (a cycle with word 1: not forced to a tree)
            [-1.0, -0.9, -0.4, neg],  # word 3: best parent word 2, but it is the highest word
        ]
    )
    scores = ParseScores(heads=heads, heights=torch.tensor([0.1, 0.2, 3.0]))
    assert paper_dependency_heads(scores) == [2, 1, 0]
    single = ParseScores(heads=torch.full((2, 2), neg), heights=torch.tensor([1.0]))
    assert paper_dependency_heads(single) == [0]


def test_paper_decoder_on_sharp_model_scores_matches_mst() -> None:
    model = tiny_model()
    tokens, mask = batch_of([4, 8, 15, 16, 23, 5, 6])
    with torch.no_grad():
        model.log_sharpness.fill_(4.0)
    score = model.score_tensors(tokens, mask)[0]
    decoded = paper_dependency_heads(score)
    assert len(decoded) == 7 and decoded.count(0) == 1


def test_config_is_checked_and_unknown_options_are_one_line_errors() -> None:
    with pytest.raises(DepinduceError, match="divisible"):
        StructFormerConfig(hidden_size=30, n_heads=8)
    with pytest.raises(DepinduceError, match="odd"):
        StructFormerConfig(conv_size=4)
    defaults = StructFormerConfig()
    assert (defaults.n_layers, defaults.hidden_size, defaults.n_heads, defaults.ff_size) == (8, 512, 8, 2048)
    assert (defaults.n_parser_layers, defaults.conv_size, defaults.dropout, defaults.pos_emb) == (3, 9, 0.1, True)


def test_positions_past_the_table_reuse_the_last_row() -> None:
    model = tiny_model(max_positions=4)
    model.eval()
    tokens, mask = batch_of(list(range(3, 12)))
    with torch.no_grad():
        assert torch.isfinite(model.encode(tokens, mask)).all()


# ------------------------------------------------------------------------------------------ kernels and dropout


def _relation(parent: torch.Tensor, mixture: torch.Tensor) -> torch.Tensor:
    """(B, heads, T, T) = w_parent[h]·P + w_dep[h]·Pᵀ, elementwise (the paper's M)."""
    return mixture[:, 0, None, None] * parent[:, None] + mixture[:, 1, None, None] * parent.transpose(1, 2)[:, None]


def plain_layer(layer: StructFormerLayer, x: torch.Tensor, parent: torch.Tensor, mixture: torch.Tensor) -> torch.Tensor:
    """The block written with ordinary torch ops (no dropout): the reference for the fused kernels."""
    attention = layer.attention
    qkv = F.linear(layer.attn_norm(x), attention.qkv.weight, attention.qkv.bias)
    batch, width, _ = x.shape
    q, k, v = qkv.view(batch, width, 3, attention.n_heads, attention.head_dim).permute(2, 0, 3, 1, 4)
    weights = torch.sigmoid(q @ k.transpose(-1, -2) / attention.head_dim**0.5) * _relation(parent, mixture)
    context = (weights @ v).transpose(1, 2).reshape(batch, width, -1)
    x = x + F.linear(context, attention.out.weight, attention.out.bias)
    inner = F.leaky_relu(F.linear(layer.ff_norm(x), layer.ff_in.weight, layer.ff_in.bias), layer.leaky_slope)
    return x + F.linear(inner, layer.ff_out.weight, layer.ff_out.bias)


@pytest.mark.parametrize("recompute_ffn", [False, True])
def test_fused_layer_matches_plain_torch_ops(recompute_ffn: bool) -> None:
    torch.manual_seed(0)
    layer = StructFormerLayer(32, 4, 64, dropout=0.0, dropatt=0.0, leaky_slope=0.01, recompute_ffn=recompute_ffn)
    for param in layer.parameters():
        torch.nn.init.normal_(param, std=0.3)
    x = torch.randn(20, 9, 32, requires_grad=True)  # batch ≥ 16: the oneDNN route
    parent = torch.rand(20, 9, 9, requires_grad=True)
    mixture = torch.rand(4, 2, requires_grad=True)
    inputs = [x, parent, mixture, *layer.parameters()]
    out = layer(x, parent, mixture)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, inputs, grad)
    reference = plain_layer(layer, x, parent, mixture)
    want = torch.autograd.grad(reference, inputs, grad)
    assert torch.allclose(out, reference, atol=1e-4)
    for a, b in zip(got, want):
        assert torch.allclose(a, b, atol=1e-4 * max(1.0, b.abs().max().item()))


def test_plain_attention_path_matches_the_fused_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from depinduce.models.structformer import attention

    torch.manual_seed(0)
    layer = StructFormerLayer(16, 4, 24, dropout=0.0, dropatt=0.0, leaky_slope=0.01)
    x = torch.randn(3, 6, 16, requires_grad=True)
    parent = torch.rand(3, 6, 6, requires_grad=True)
    mixture = torch.rand(4, 2, requires_grad=True)
    inputs = [x, parent, mixture, *layer.parameters()]
    fused = layer(x, parent, mixture)
    fused_grads = torch.autograd.grad(fused.sum(), inputs)
    monkeypatch.setattr(attention, "_fused_attention_supported", lambda qkv: False)
    plain = layer(x, parent, mixture)
    plain_grads = torch.autograd.grad(plain.sum(), inputs)
    assert torch.allclose(fused, plain, atol=1e-5)
    for a, b in zip(fused_grads, plain_grads):
        assert torch.allclose(a, b, atol=1e-4)


def test_recomputing_the_feed_forward_changes_nothing() -> None:
    kept = StructFormerLayer(16, 4, 24, dropout=0.3, dropatt=0.2, leaky_slope=0.01)
    recomputed = StructFormerLayer(16, 4, 24, dropout=0.3, dropatt=0.2, leaky_slope=0.01, recompute_ffn=True)
    recomputed.load_state_dict(kept.state_dict())
    x = torch.randn(20, 6, 16, requires_grad=True)
    parent, mixture = torch.rand(20, 6, 6), torch.rand(4, 2)
    results = []
    for layer in (kept, recomputed):
        torch.manual_seed(5)  # the same dropout masks
        out = layer(x, parent, mixture)
        results.append((out, torch.autograd.grad(out.sum(), [x, *layer.parameters()])))
    (out_a, grads_a), (out_b, grads_b) = results
    assert torch.allclose(out_a, out_b, atol=1e-5)
    for a, b in zip(grads_a, grads_b):
        assert torch.allclose(a, b, atol=1e-4)


def test_attention_core_gradients_with_dropout() -> None:
    torch.manual_seed(0)
    heads, width, dim = 3, 5, 4
    qkv = torch.randn(2, width, 3 * heads * dim, dtype=F64, requires_grad=True)
    parent = torch.rand(2, width, width, dtype=F64, requires_grad=True)
    mixture = torch.rand(heads, 2, dtype=F64, requires_grad=True)
    weight = torch.randn(6, heads * dim, dtype=F64, requires_grad=True)
    bias = torch.randn(6, dtype=F64, requires_grad=True)
    rows = torch.tensor([[True, False, False, True, True], [False, True, False, False, True]])
    for seed in (None, 123):
        for selected in (None, rows):
            assert torch.autograd.gradcheck(
                lambda *a: _AttentionCore.apply(*a, heads, 0.3, seed, selected), (qkv, parent, mixture, weight, bias)
            )


@pytest.mark.parametrize("recompute_ffn", [False, True])
def test_layer_gradients_with_dropout_are_exact(recompute_ffn: bool) -> None:
    torch.manual_seed(0)
    layer = StructFormerLayer(8, 2, 12, dropout=0.2, dropatt=0.3, leaky_slope=0.01,
                              recompute_ffn=recompute_ffn).double()
    x = torch.randn(2, 4, 8, dtype=F64, requires_grad=True)
    parent = torch.rand(2, 4, 4, dtype=F64, requires_grad=True)
    mixture = torch.rand(2, 2, dtype=F64, requires_grad=True)

    def run(x: torch.Tensor, parent: torch.Tensor, mixture: torch.Tensor) -> torch.Tensor:
        torch.manual_seed(11)  # the same dropout masks on every call
        return layer(x, parent, mixture)

    assert torch.autograd.gradcheck(run, (x, parent, mixture), fast_mode=True)


def test_linear_kernels_match_torch() -> None:
    torch.manual_seed(0)
    x = torch.randn(18, 7, 12, requires_grad=True)
    norm, linear = torch.nn.LayerNorm(12), torch.nn.Linear(12, 20)
    torch.nn.init.normal_(norm.weight)
    for fused, plain in (
        (lambda: position_linear(x, linear.weight, linear.bias), lambda: linear(x)),
        (lambda: norm_linear(x, norm, linear), lambda: linear(norm(x))),
    ):
        params = [x, linear.weight, linear.bias, norm.weight, norm.bias]
        out, ref = fused(), plain()
        grad = torch.randn_like(ref)
        got = torch.autograd.grad(out, params, grad, allow_unused=True)
        want = torch.autograd.grad(ref, params, grad, allow_unused=True)
        assert torch.allclose(out, ref, atol=1e-5)
        for a, b in zip(got, want):
            assert (a is None and b is None) or torch.allclose(a, b, atol=1e-4)


def test_dropout_masks_rate_reproducibility_and_gradient() -> None:
    mask = drop_mask((400, 500), 0.1, seed=7)
    assert abs(mask.float().mean().item() - 0.1) < 0.005
    assert torch.equal(mask, drop_mask((400, 500), 0.1, seed=7))
    assert not torch.equal(mask, drop_mask((400, 500), 0.1, seed=8))
    x = torch.randn(50, 40, requires_grad=True)
    out = apply_dropout(x, 0.25, training=True)
    (grad,) = torch.autograd.grad(out.sum(), x)
    kept = out != 0
    assert torch.allclose(out[kept], x[kept] / 0.75)
    assert torch.allclose(grad, kept.float() / 0.75)
    assert apply_dropout(x, 0.25, training=False) is x


@pytest.mark.parametrize("shape", [(3, 5, 7), (2, 4, 9, 9), (13,)])
def test_a_kept_mask_is_the_drawn_mask_in_an_eighth_of_the_memory(shape: tuple[int, ...]) -> None:
    mask = drop_mask(shape, 0.3, seed=11)
    kept = KeptMask(mask)
    assert kept.bits.nbytes == -(-mask.numel() // 8)
    assert torch.equal(kept.unpack(), mask)
    rows = torch.tensor([[True, False, True, True], [False, False, True, False]])
    selected = drop_mask((1, 4, 6), 0.3, seed=5, rows=rows)
    assert torch.equal(KeptMask(selected).unpack(), drop_mask((2, 4, 6), 0.3, seed=5)[rows].view(1, 4, 6))


@pytest.mark.parametrize("setting", [True, False, "auto"])
def test_recompute_ffn_setting_changes_memory_not_numbers(setting: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """Forced on, forced off, and auto on a machine short of memory give the same gradients as the reference
    (recompute off)."""
    monkeypatch.setattr("depinduce.models.layers.memory.available_bytes", lambda: 1)
    vocab = Vocab([f"w{i}" for i in range(30)])
    tokens, mask = pad_batch([[5, 6, 7, 8, 9, 10], [6, 7, 8]], 0)
    grads = []
    for value in (False, setting):
        torch.manual_seed(0)
        config = StructFormerConfig(hidden_size=16, n_layers=2, n_heads=4, ff_size=24, recompute_ffn=value)
        model = StructFormer(config, vocab).train()
        torch.manual_seed(3)  # the same dropout masks
        loss = model.encode(tokens, mask)[mask].pow(2).mean()
        grads.append(torch.autograd.grad(loss, list(model.parameters()), allow_unused=True))
    for a, b in zip(*grads):
        assert (a is None and b is None) or torch.allclose(a, b, atol=1e-5)


def test_recompute_ffn_accepts_true_false_auto_only() -> None:
    with pytest.raises(DepinduceError, match="recompute_ffn must be true, false or auto, not 'yes'"):
        StructFormerConfig(recompute_ffn="yes")


# ------------------------------------------------------------------------------- the authors' settings (paper switches)


def test_batch_margin_lets_a_batch_mate_shift_a_sentence() -> None:
    # As in test_calibration_margin_is_per_sentence: A's own margin is 4.5, B's is 100.  Under the batch margin
    # (the authors' forward pass) B's 100 is subtracted from A's distances too; under the sentence margin it is not.
    d_a, h_a = [3.0, 5.0], [0.0, 1.0, 0.5]
    distance, height, mask = padded([d_a, [100.0]], [h_a, [0.0, 0.0]])
    per_batch = calibrate_distances(distance, height, mask, per_batch=True)
    assert per_batch[0, :2].tolist() == [3.0 - 100.0, 5.0 - 100.0] and per_batch[1, :1].tolist() == [0.0]
    assert per_batch[0, 2] == BIG and per_batch[1, 1] == BIG
    per_sentence = calibrate_distances(distance, height, mask)
    assert per_sentence[0, :2].tolist() == [3.0 - 4.5, 5.0 - 4.5]
    alone = calibrate_distances(*padded([d_a], [h_a]), per_batch=True)
    assert alone[0, :2].tolist() == [3.0 - 4.5, 5.0 - 4.5]  # a batch of one: the two margins agree


def test_margin_switch_applies_to_the_forward_pass_but_not_to_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    import depinduce.models.structformer.model as model_module

    calls: list[bool] = []

    def recording(distance, height, mask, per_batch=False):  # type: ignore[no-untyped-def]
        calls.append(per_batch)
        return calibrate_distances(distance, height, mask, per_batch)

    monkeypatch.setattr(model_module, "calibrate_distances", recording)
    tokens, mask = batch_of([4, 8, 15, 16], [23, 42])
    for margin, forward in (("batch", True), ("sentence", False)):
        model = tiny_model(margin=margin)
        calls.clear()
        with torch.no_grad():
            model.encode(tokens, mask)
            assert calls == [forward]
            model.score_tensors(tokens, mask)  # the authors parse one sentence at a time
            assert calls == [forward, False]
    assert StructFormerConfig().margin == "sentence"


def test_nary_tree_splits_at_every_tied_maximum() -> None:
    from depinduce.structures.spans import binary_tree_from_distances, labelled_spans, nary_tree_from_distances

    words = list("abcdefg")
    distances = [2.0, 5.0, 1.0, 5.0, 5.0, 0.0]  # three tied maxima at the top: ((a b) (c d) e (f g))
    nary = nary_tree_from_distances(words, distances)
    assert sorted((a, b) for _, a, b in labelled_spans(nary)) == [(0, 2), (0, 7), (2, 4), (5, 7)]
    assert len(nary) == 4 and nary.leaves() == words
    binary = binary_tree_from_distances(words, distances)  # left to right: (a b) ((c d) (e (f g)))
    assert sorted((a, b) for _, a, b in labelled_spans(binary)) == [(0, 2), (0, 7), (2, 4), (2, 7), (4, 7), (5, 7)]
    # ties inside a child split it n-ary too: (a ((b c) d e) f); a unique maximum gives the binary tree's split
    inner = nary_tree_from_distances(list("abcdef"), [7.0, 1.0, 4.0, 4.0, 7.0])
    assert sorted((a, b) for _, a, b in labelled_spans(inner)) == [(0, 6), (1, 3), (1, 5)]
    assert len(inner) == 3 and len(inner[1]) == 3
    assert labelled_spans(nary_tree_from_distances(list("abcd"), [3.0, 1.0, 2.0])) == labelled_spans(
        binary_tree_from_distances(list("abcd"), [3.0, 1.0, 2.0]))


def test_tree_ties_switch_reaches_parse_brackets(monkeypatch: pytest.MonkeyPatch) -> None:
    from depinduce.structures.sentence import Sentence
    from depinduce.pipeline import ParseRequest, parse
    from depinduce.structures.spans import labelled_spans

    words = ["w1", "w2", "w3", "w4", "w5"]
    distances = torch.tensor([1.0, 3.0, 3.0, 3.0])  # every boundary but the first tied at the top

    spans = {}
    for ties in ("nary", "binary"):
        model = tiny_model(tree_ties=ties)
        model.eval()
        # the backend's own scores carry the switch through the shared parse_scores
        assert model.parse_scores([words])[0].split_ties == (ties == "nary")
        flag = model.score_tensors(torch.tensor([[4, 5, 6, 7, 8]]), torch.ones((1, 5), dtype=torch.bool))[0].split_ties

        def fixed_scores(tokens, mask, flag=flag):  # type: ignore[no-untyped-def]
            return [ParseScores(heads=torch.zeros(6, 6), distances=distances, heights=torch.zeros(5), split_ties=flag)]

        monkeypatch.setattr(model, "score_tensors", fixed_scores)
        (done,) = parse([Sentence(words=list(words))], model, ParseRequest(fmt="brackets"), progress=False)
        spans[ties] = sorted((a, b) for _, a, b in labelled_spans(done.tree))
    assert spans["nary"] == [(0, 2), (0, 5)]  # ((w1 w2) w3 w4 w5)
    assert spans["binary"] == [(0, 2), (0, 5), (2, 5), (3, 5)]


def test_own_decoder_makes_every_word_tied_at_the_greatest_height_a_root() -> None:
    from depinduce.structures.decode import decode_batch

    neg = float("-inf")
    heads = torch.tensor(
        [
            [neg, neg, neg, neg, neg],
            [-9.0, neg, -0.5, -0.5, -3.0],  # word 1: tied at the greatest height → root
            [-9.0, -0.7, neg, -0.2, -0.2],  # word 2: parents 3 and 4 tie → the first, 3
            [-9.0, -0.1, -0.5, neg, -3.0],  # word 3: tied at the greatest height → root
            [-9.0, -2.0, -0.3, -0.4, neg],  # word 4: parent 2
        ]
    )
    scores = ParseScores(heads=heads, heights=torch.tensor([2.5, 1.0, 2.5, -4.0]))
    decoder = StructFormer.own_decoders["structformer-argmax"]
    assert decoder.decode(scores) == [0, 3, 0, 2]
    # the shared argmax decoder keeps only the first tied word as the root
    assert decode_batch([heads], "argmax", [int(scores.heights.argmax()) + 1]) == [[0, 3, 1, 2]]
    assert decoder.decode(ParseScores(heads=torch.full((2, 2), neg), heights=torch.tensor([0.3]))) == [0]
    # without a tie it is the shared decoder
    untied = ParseScores(heads=heads, heights=torch.tensor([2.5, 1.0, 2.4, -4.0]))
    assert decoder.decode(untied) == decode_batch([heads], "argmax", [1])[0] == [0, 3, 1, 2]


def test_wide_height_range_takes_the_exact_fallback() -> None:
    from depinduce.models.structformer.parent import _fast_parent, span_boundaries

    # s1 × (height range) = 2500 > 1400: exp(±1250) is outside float64, where clamped exponents were wrong by 1.0
    d, h = [1000.0, 1500.0, 2200.0, 900.0, 1900.0], [0.0, 2000.0, 700.0, 2500.0, 100.0, 1800.0]
    d_small, h_small = [0.3, -0.2], [0.1, 0.5, -0.4]
    distance, height, mask = padded([d, d_small], [h, h_small])
    distance.requires_grad_()
    height.requires_grad_()
    s0, s1 = torch.tensor(0.01, dtype=F64), torch.tensor(1.0, dtype=F64)
    parent, root = parent_distribution(distance, height, mask, s0, s1)
    for b, (dd, hh) in enumerate(((d, h), (d_small, h_small))):
        n = len(hh)
        want_parent, want_root = naive_parent(dd, hh, 0.01, 1.0)  # float64 softmax per span: no range limit
        assert torch.allclose(parent[b, :n, :n], want_parent, atol=1e-12, rtol=0)
        assert torch.allclose(root[b, :n], want_root, atol=1e-12, rtol=0)
        assert torch.all(parent[b, n:] == 0) and torch.all(parent[b, :, n:] == 0) and torch.all(root[b, n:] == 0)
    (parent.sum() + (root * torch.arange(6)).sum()).backward()
    assert torch.isfinite(height.grad).all() and torch.isfinite(distance.grad).all()
    # the matmul path alone cannot hold these exponents, so this test can tell the two apart
    alone_d, alone_h, _ = padded([d], [h])
    p_left, p_right = span_boundaries(alone_d, alone_h, s0)
    fast = _fast_parent(p_left, p_right, alone_h - 1250.0)[0]
    assert not torch.isfinite(fast).all()


def test_wide_fallback_gradients_match_finite_differences() -> None:
    distance, height, mask = padded([[1000.0, 1500.0, 2200.0]], [[0.0, 2000.0, 700.0, 2500.0]])
    distance.requires_grad_()
    height.requires_grad_()
    s0 = torch.tensor(0.01, dtype=F64, requires_grad=True)
    s1 = torch.tensor(1.0, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *args: parent_distribution(args[0], args[1], mask, args[2], args[3]),
                                    (distance, height, s0, s1), eps=1e-6, atol=1e-6)


def _mp_parent(d: list, h: list, s0: object, s1: object) -> list[list]:
    """The authors' function (the paper's definition, their span softmax) in mpmath: P with its diagonal."""
    import mpmath as mp

    n = len(h)
    bounds = [*d, mp.mpf(10) ** 30]
    crosses = [[1 / (1 + mp.exp(-s0 * (h[i] - bounds[k]))) for k in range(n)] for i in range(n)]

    def left(i: int, l: int) -> object:  # P(L_i <= l)
        return mp.mpf(0) if l < 0 else mp.mpf(1) if l >= i else min(crosses[i][k] for k in range(l, i))

    def right(i: int, r: int) -> object:  # P(R_i >= r)
        return mp.mpf(0) if r >= n else mp.mpf(1) if r <= i else min(crosses[i][k] for k in range(i, r))

    scores = [s1 * x for x in h]
    parent = [[mp.mpf(0)] * n for _ in range(n)]
    for l in range(n):
        for r in range(l, n):
            top = max(scores[l : r + 1])
            z = mp.fsum(mp.exp(scores[k] - top) for k in range(l, r + 1))
            for i in range(l, r + 1):
                weight = (left(i, l) - left(i, l - 1)) * (right(i, r) - right(i, r + 1))
                for j in range(l, r + 1):
                    parent[i][j] += weight * mp.exp(scores[j] - top) / z
    return parent


@pytest.mark.parametrize("heights", [
    [580.0, 581.25, -590.5, -589.75, 575.0],  # |s1·h| ≤ 600: the fast path, close pairs far from 0
    [1000.0, 1001.5, -700.25, -699.0, 300.75],  # the exact fallback
], ids=["fast path", "fallback"])
def test_parent_distribution_is_exact_against_a_50_digit_reference(heights: list[float]) -> None:
    """Values and gradients (of Σ W ⊙ P for a fixed W, with respect to distances, heights, s0 and s1) to float64's
    rounding of a 50-digit evaluation of the authors' function, as their own float64 softmax comes: before,
    logcumsumexp's backward (a positive and a negative part cancelling) and exp(−log Z) of a log Z near 700 put
    the gradients 1e-11 off on both paths."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 50
    rng = random.Random(5)
    n = len(heights)
    d = [float(rng.gauss(0.0, 400.0)) for _ in range(n - 1)]
    s0, s1 = 1.0 / 256, 1.0
    weights = [[float(rng.gauss(0.0, 1.0)) for _ in range(n)] for _ in range(n)]
    inputs = [*d, *heights, s0, s1]

    def reference(values: list) -> object:
        full = _mp_parent(values[: n - 1], values[n - 1 : 2 * n - 1], values[-2], values[-1])
        return mp.fsum(weights[i][j] * full[i][j] for i in range(n) for j in range(n))

    exact = [mp.mpf(x) for x in inputs]
    step = mp.mpf(10) ** -20
    gradient = []
    for k in range(len(exact)):
        up, down = list(exact), list(exact)
        up[k] += step
        down[k] -= step
        gradient.append((reference(up) - reference(down)) / (2 * step))
    want = _mp_parent(exact[: n - 1], exact[n - 1 : 2 * n - 1], exact[-2], exact[-1])

    distance, height, mask = padded([d], [heights])
    distance.requires_grad_()
    height.requires_grad_()
    sharp = torch.tensor([s0, s1], dtype=F64, requires_grad=True)
    parent, root = parent_distribution(distance, height, mask, sharp[0], sharp[1])
    full = parent[0] + torch.diag(root[0])
    (full * torch.tensor(weights, dtype=F64)).sum().backward()
    got = [*distance.grad[0, : n - 1].tolist(), *height.grad[0].tolist(), *sharp.grad.tolist()]
    value_error = max(abs(want[i][j] - mp.mpf(float(full.detach()[i, j]))) for i in range(n) for j in range(n))
    assert value_error < 4e-16
    # each derivative to 1e-15 of the size of the terms it sums: s0's are (h_i − d_k) ∂/∂γ, s1's h_k ∂/∂c_k (≈ 10³
    # times more; the authors' own float64 comes as close, 1e-13 on these)
    scale = [1.0] * (2 * n - 1) + [max(abs(h - b) for h in heights for b in d), max(abs(x) for x in heights)]
    errors = [float(abs(g - mp.mpf(o))) / s for g, o, s in zip(gradient, got, scale)]
    assert max(errors) < 1e-15, [f"{e:.1e}" for e in errors]


def test_paper_recipe_uses_the_authors_settings() -> None:
    from importlib.resources import files

    import yaml

    recipe = yaml.safe_load((files("depinduce") / "recipes" / "structformer-ptb.yaml").read_text())
    config = StructFormerConfig(**recipe["model_config"])
    assert (config.dropatt, config.margin, config.tree_ties) == (0.0, "batch", "nary")
    assert recipe["train"]["decoder"] == "structformer-argmax"
    assert StructFormerConfig().dropatt == 0.0  # the authors' main.py default
    for key, bad in (("margin", "corpus"), ("tree_ties", "left")):
        with pytest.raises(DepinduceError, match=f"{key} must be one of"):
            StructFormerConfig(**{key: bad})


def test_dropout_applies_where_the_authors_code_applies_it() -> None:
    """The authors' StructFormer layer drops the attention weights (dropatt), the attention block's output before
    its residual sum, the feed-forward block's inner activation and its output before the residual sum; then the
    states before the output layer.  No dropout on the embeddings or in the parser.  depinduce's last layer works
    at the masked positions only, with the masks the whole batch would get there, and its output dropout at those
    positions.  scripts/check_authors.py compares the masks themselves with theirs; this pins the list without
    their code (a removed residual dropout, say, changes it)."""
    model = tiny_model(dropout=0.1, dropatt=0.05)
    model.train()
    tokens, mask = batch_of([3, 4, 5, 6, 7], [8, 9, 10])
    masked = torch.zeros_like(mask)
    masked[0, 1] = masked[1, 2] = True
    shapes = drawn_dropout_masks(lambda: MaskedLM(0.3).compute(model, tokens=tokens, mask=mask, masked=masked))
    b, t, hidden, heads, ff = 2, 5, TINY["hidden_size"], TINY["n_heads"], TINY["ff_size"]
    layer = [(heads, b, t, t), (b, t, hidden), (b, t, ff), (b, t, hidden)]
    assert shapes == [*layer * TINY["n_layers"], (2, hidden)], str(shapes)
