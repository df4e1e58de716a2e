"""UDGN: parser distribution and undirected mask, the DGN layer against the paper's equations (every ablation),
the fused CPU core, the authors' second dropout and initialisation, scores and decoding (depinduce's and the
authors'), batch invariance, recipes, and train → parse end to end."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import conllu
import pytest
import torch
from click.testing import CliRunner

from depinduce.cli.main import cli
from depinduce.data.vocab import Vocab
from depinduce.models.neural import pad_batch
from depinduce.errors import DepinduceError
from depinduce.models.udgn import UDGN, UDGNConfig
from depinduce.models.base import ParseScores
from depinduce.models.udgn import dgn
from depinduce.models.udgn.decoders import authors_tree
from depinduce.models.udgn.dgn import DGNLayer, pair_directions
from depinduce.models.layers.bilstm import BiLSTM
from depinduce.models.udgn.parser import HeadSelectiveParser, undirected_mask
from depinduce.structures.decode import decode_heads
from dropout_support import drawn_dropout_masks
from depinduce.structures.dependency import tree_problem
from depinduce.training.config import load_recipe, resolve_config
from depinduce.training.objectives import MaskedLM
from training_support import REPO, make_data

TINY = {"hidden_size": 16, "n_layers": 2, "n_heads": 4, "head_size": 6, "parser_layers": 2,
        "parser_hidden_size": 8}
F64 = torch.float64


def tiny_model(**overrides: object) -> UDGN:
    torch.manual_seed(0)
    return UDGN(UDGNConfig(**{**TINY, **overrides}), Vocab([f"w{i}" for i in range(40)]))


def batch_of(*rows: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    return pad_batch(rows, 0)


# ------------------------------------------------------------------------------------------ parser and mask


def test_head_distribution_rows_sum_to_one_over_real_words_and_padding_is_zero() -> None:
    model = tiny_model()
    tokens, mask = batch_of([4, 8, 15, 16, 23, 9], [30, 7, 3], [9])
    p = model.head_distribution(tokens, mask)
    real = mask[:, :, None] & mask[:, None, :]
    assert torch.allclose(p.sum(-1), mask.float(), atol=1e-6)  # 1 on real rows, 0 on padding rows
    assert torch.all(p[~real] == 0) and torch.all(p[real] > 0)
    assert torch.allclose(p[2, 0, 0], torch.tensor(1.0))  # a one-word sentence: all mass on itself (its root)


def test_undirected_mask_is_a_symmetric_probabilistic_or_with_zero_diagonal() -> None:
    model = tiny_model()
    tokens, mask = batch_of([4, 8, 15, 16, 23], [5, 6, 7])
    p = model.head_distribution(tokens, mask)
    m = undirected_mask(p)
    assert torch.allclose(m, m.transpose(1, 2)) and torch.all(m.diagonal(dim1=1, dim2=2) == 0)
    assert torch.all((m >= 0) & (m <= 1))
    i, j = 1, 3
    expected = p[0, i, j] + p[0, j, i] - p[0, i, j] * p[0, j, i]
    assert torch.allclose(m[0, i, j], expected)
    # certain edges both ways stay a probability: 1 + 1 − 1 = 1, not 2
    both = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]])
    assert torch.equal(undirected_mask(both), both)
    assert torch.all(m[1, 3:] == 0) and torch.all(m[1, :, 3:] == 0)


# ----------------------------------------------------------------------------------------------- DGN layer


def reference_layer(layer: DGNLayer, x: torch.Tensor, m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The paper's equations 7–15 term by term (loops over heads and words), no dropout; returns the new states
    and the controller â[b, k, i, j]."""
    opts = layer.opts
    n, d = opts.n_heads, opts.head_size
    batch, width, _ = x.shape
    proj = (x @ layer.project.weight.T + layer.project.bias).view(batch, width, opts.n_parts, n, d)
    controller = torch.zeros(batch, n, width, width, dtype=x.dtype)
    out = torch.zeros(batch, width, n * d, dtype=x.dtype)
    for b, i, j in itertools.product(range(batch), range(width), range(width)):
        scores = []
        for k in range(n):
            s = proj[b, i, 0, k] @ proj[b, j, 1, k]
            if layer.direction_bias is not None and i != j:
                s = s + layer.direction_bias[k, 0 if j < i else 1]
            scores.append(s / math.sqrt(d))
        scores = torch.stack(scores)
        controller[b, :, i, j] = scores.softmax(0) if opts.competition == "softmax" else scores.sigmoid()
    for b, i, k in itertools.product(range(batch), range(width), range(n)):
        message = torch.zeros(d, dtype=x.dtype)
        for j in range(width):
            value = proj[b, j, 2, k]
            value = torch.tanh(value) if opts.activation == "tanh" else value
            message = message + controller[b, k, i, j] * m[b, i, j] * value
        gate = torch.sigmoid(proj[b, i, 3, k]) if opts.gates else 1.0
        out[b, i, k * d : (k + 1) * d] = gate * message
    return x + out @ layer.out.weight.T + layer.out.bias, controller


ABLATIONS = [{}, {"gates": False}, {"competition": "sigmoid"}, {"relative_bias": False}, {"activation": "identity"}]


@pytest.mark.parametrize("options", ABLATIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "paper")
def test_layer_follows_the_paper_equations_for_every_option(options: dict) -> None:
    torch.manual_seed(0)
    layer = DGNLayer(8, 3, 4, dropout=0.0, dropatt=0.0, **options).double()
    for param in layer.parameters():
        torch.nn.init.normal_(param, std=0.5)
    x = torch.randn(2, 5, 8, dtype=F64, requires_grad=True)
    m = undirected_mask(torch.rand(2, 5, 5, dtype=F64).softmax(-1))
    want, want_controller = reference_layer(layer, x, m)
    controllers: list[torch.Tensor] = []
    plain = layer(x, m, pair_directions(5), controllers)  # the plain path (controllers requested)
    fused = layer(x, m, pair_directions(5))  # the fused CPU core (training mode, gradients on), recomputing
    kept = layer(x, m, pair_directions(5), recompute=False)  # the fused core keeping its intermediates
    assert torch.allclose(plain, want) and torch.allclose(fused, want) and torch.allclose(kept, want)
    assert torch.allclose(controllers[0], want_controller)
    want_grads = torch.autograd.grad(want.sum(), [x, *layer.parameters()], retain_graph=True)
    for out in (fused, kept):
        for a, b in zip(torch.autograd.grad(out.sum(), [x, *layer.parameters()]), want_grads):
            assert torch.allclose(a, b)


def test_ablation_options_change_the_parameters_as_specified() -> None:
    paper, no_gates, no_bias = (DGNLayer(8, 3, 4, 0.0, 0.0, **o) for o in ({}, {"gates": False},
                                                                           {"relative_bias": False}))
    assert paper.project.out_features == 4 * 3 * 4 and no_gates.project.out_features == 3 * 3 * 4
    assert paper.direction_bias.shape == (3, 2) and no_bias.direction_bias is None
    assert not any("direction_bias" in name for name, _ in no_bias.named_parameters())
    assert torch.all(DGNLayer(8, 3, 4, 0.0, 0.0, init="depinduce").direction_bias == 0)  # the ablated model


def test_no_gates_equals_a_gate_fixed_at_one() -> None:
    torch.manual_seed(0)
    gated, ungated = DGNLayer(8, 3, 4, 0.0, 0.0), DGNLayer(8, 3, 4, 0.0, 0.0, gates=False)
    width = 3 * 4
    with torch.no_grad():
        ungated.project.weight.copy_(gated.project.weight[: 3 * width])
        ungated.project.bias.copy_(gated.project.bias[: 3 * width])
        ungated.out.load_state_dict(gated.out.state_dict())
        ungated.direction_bias.copy_(torch.randn(3, 2))
        gated.direction_bias.copy_(ungated.direction_bias)
        gated.project.weight[3 * width :] = 0.0
        gated.project.bias[3 * width :] = 1e4  # sigmoid(1e4) == 1.0 exactly in float32
    x, m = torch.randn(2, 6, 8), undirected_mask(torch.rand(2, 6, 6).softmax(-1))
    assert torch.allclose(gated(x, m, pair_directions(6)), ungated(x, m, pair_directions(6)), atol=1e-6)


def test_graph_floor_gives_the_authors_log_space_weights() -> None:
    """``graph_floor: 1e-6``: the authors' a = exp(log_softmax_k(s) + log(m + 1e-6)) with padding keys zeroed,
    written out on a hand-built batch (a 3-word and a 2-word sentence); the default weights by m alone."""
    tokens, mask = batch_of([5, 6, 7], [8, 9])
    floored, plain = (tiny_model(graph_floor=g).double().eval() for g in (1e-6, 0.0))
    m = undirected_mask(floored.head_distribution(tokens, mask))
    assert torch.equal(plain.graph(tokens, mask), m)
    graph = floored.graph(tokens, mask)
    assert torch.allclose(graph[1, :, :2], m[1, :, :2] + 1e-6, rtol=0, atol=1e-15)  # the diagonal too
    assert graph[1, 0, 0] == 1e-6 and torch.all(graph[1, :, 2] == 0)  # padding keys pass nothing
    layer = floored.layers[0]
    x = floored.embedding(tokens)
    parts = (x @ layer.project.weight.T + layer.project.bias).view(2, 3, 4, 4, 6)  # (B, T, q/k/v/g, N, d)
    q, k, v, g = parts.unbind(2)
    s = torch.einsum("bihd,bjhd->bijh", q, k)
    s = s + torch.stack([torch.ones(3, 3).tril(-1), torch.ones(3, 3).triu(1)], -1).double() @ layer.direction_bias.T
    a = (torch.log_softmax(s * 6**-0.5, dim=-1) + (m + 1e-6).log()[..., None]).exp()
    a = a.masked_fill(~mask[:, None, :, None], 0.0)
    o = torch.einsum("bijh,bjhd->bihd", a, torch.tanh(v)) * torch.sigmoid(g)
    want = x + o.reshape(2, 3, -1) @ layer.out.weight.T + layer.out.bias
    got = layer(x, graph, pair_directions(3))
    assert torch.allclose(got[mask], want[mask], rtol=0, atol=1e-14)


def test_float64_model_keeps_float64_head_scores() -> None:
    """No float32 cast inside a float64 model: the parser's logits, p and the parse scores stay float64."""
    model = tiny_model().double()
    tokens, mask = batch_of([5, 6, 7], [8, 9])
    assert model.parser.logits(tokens, mask).dtype == F64 and model.head_distribution(tokens, mask).dtype == F64
    assert all(s.heads.dtype == F64 for s in model.score_tensors(tokens, mask))


def test_relative_bias_favours_a_head_in_one_direction_only() -> None:
    torch.manual_seed(0)
    layer = DGNLayer(8, 3, 4, 0.0, 0.0)
    with torch.no_grad():
        layer.direction_bias[0, 0] = 20.0  # head 0 strongly preferred for keys on the left
    controllers: list[torch.Tensor] = []
    layer(torch.randn(1, 5, 8), torch.ones(1, 5, 5), pair_directions(5), controllers)
    head0 = controllers[0][0, 0]
    left = torch.ones(5, 5).tril(-1).bool()
    right = torch.ones(5, 5).triu(1).bool()
    assert torch.all(head0[left] > 0.99) and torch.all(head0[right] < 0.99)


@pytest.mark.parametrize("recompute", [True, False])
def test_fused_core_gradients_are_exact_with_dropout(recompute: bool) -> None:
    torch.manual_seed(0)
    layer = DGNLayer(6, 2, 3, dropout=0.3, dropatt=0.2).double()
    x = torch.randn(2, 4, 6, dtype=F64, requires_grad=True)
    m = torch.rand(2, 4, 4, dtype=F64, requires_grad=True)
    directions = pair_directions(4)

    def run(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        torch.manual_seed(11)  # the same dropout masks on every call
        return layer(x, m, directions, recompute=recompute)

    assert torch.autograd.gradcheck(run, (x, m), fast_mode=True)


def test_fused_core_matches_plain_autograd_with_the_same_dropout(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    layer = DGNLayer(16, 4, 8, dropout=0.3, dropatt=0.2)
    x = torch.randn(20, 7, 16, requires_grad=True)  # batch ≥ 16: the oneDNN route
    m = torch.rand(20, 7, 7, requires_grad=True)
    inputs = [x, m, *layer.parameters()]
    results = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(dgn, "_fused_supported", lambda parts: False)
        torch.manual_seed(5)  # the same dropout seeds, drawn in the same order by both paths
        out = layer(x, m, pair_directions(7))
        results.append((out, torch.autograd.grad(out.sum(), inputs)))
    (out_a, grads_a), (out_b, grads_b) = results
    assert torch.allclose(out_a, out_b, atol=1e-5)
    for a, b in zip(grads_a, grads_b):
        assert torch.allclose(a, b, atol=1e-4 * max(1.0, b.abs().max().item()))


@pytest.mark.parametrize("recompute", [True, False])
def test_fused_core_under_bf16_autocast_matches_autocasts_plain_ops(monkeypatch: pytest.MonkeyPatch,
                                                                    recompute: bool) -> None:
    """precision: bf16 — the fused core takes autocast's bfloat16 projection and makes the casts autocast makes
    for the plain ops (bfloat16 products, float32 controller): the same output, nearly the same gradients (the
    order of bfloat16 roundings differs), every gradient float32 like its parameter."""
    torch.manual_seed(0)
    layer = DGNLayer(64, 4, 16, dropout=0.3, dropatt=0.2)
    x = torch.randn(20, 9, 64, requires_grad=True)
    m = torch.rand(20, 9, 9, requires_grad=True)
    inputs = [x, m, *layer.parameters()]
    weights = torch.linspace(-1.0, 1.0, 20 * 9 * 64).view(20, 9, 64)
    results = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(dgn, "_fused_supported", lambda parts: False)
        torch.manual_seed(5)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = layer(x, m, pair_directions(9), recompute=recompute)
        results.append((out, torch.autograd.grad((out * weights).sum(), inputs)))
    (out_fused, grads_fused), (out_plain, grads_plain) = results
    assert out_fused.dtype == torch.float32  # the residual stream
    torch.testing.assert_close(out_fused, out_plain, atol=1e-6, rtol=0.0)
    for fused_grad, plain_grad, value in zip(grads_fused, grads_plain, inputs):
        assert fused_grad.dtype == value.dtype == torch.float32
        assert torch.nn.functional.cosine_similarity(fused_grad.flatten(), plain_grad.flatten(), dim=0) > 0.9999
        assert (fused_grad - plain_grad).abs().max() <= 0.01 * plain_grad.abs().max()


def test_fused_core_runs_under_autocast() -> None:
    """The fused core, not torch's plain ops, handles a bfloat16 training step on CPU (its memory saving)."""
    parts = torch.zeros(2, 3, 8, dtype=torch.bfloat16)
    with torch.enable_grad():
        assert dgn._fused_supported(parts)
        assert dgn._fused_supported(parts.double())  # the gradcheck above runs the fused core
        assert not dgn._fused_supported(parts.to(torch.float16))
    with torch.no_grad():
        assert not dgn._fused_supported(parts)


@pytest.mark.parametrize("path", ["fused, recompute", "fused, keep", "plain"])
def test_the_authors_second_dropout_drops_the_projected_output(path: str) -> None:
    """dgn_dropout: twice — with W_o = 0 and b_o = 1 the branch is 1 wherever the output dropout keeps it (scaled
    to 1/(1 − p) = 2) and 0 where it drops it; ``once`` adds exactly 1 everywhere.  Backward uses the same mask."""
    outputs = {}
    for twice in (True, False):
        torch.manual_seed(0)
        layer = DGNLayer(8, 2, 4, dropout=0.5, dropatt=0.0, dropout_twice=twice).train()
        with torch.no_grad():
            layer.out.weight.zero_()
            layer.out.bias.fill_(1.0)
        x = torch.randint(-4, 5, (3, 40, 8)).float().requires_grad_()  # integers: out − x is exact
        m = undirected_mask(torch.rand(3, 40, 40).softmax(-1))
        controllers = [] if path == "plain" else None
        out = layer(x, m, pair_directions(40), controllers, recompute=path == "fused, recompute")
        branch = (out - x).detach()
        bias_grad, x_grad = torch.autograd.grad(out.sum(), [layer.out.bias, x])
        outputs[twice] = branch
        assert torch.equal(x_grad, torch.ones_like(x))  # the residual is never dropped
        assert torch.allclose(bias_grad, branch.sum(dim=(0, 1)))  # gradient 2 exactly where the output was kept
    twice, once = outputs[True], outputs[False]
    assert torch.equal(once, torch.ones_like(once))
    kept = twice == 2.0
    assert torch.all(kept | (twice == 0.0))
    assert 0.4 < kept.float().mean().item() < 0.6  # p = 0.5 of 960 entries dropped


def test_model_applies_the_second_dropout_only_with_dgn_dropout_twice() -> None:
    for setting, expected in (("twice", True), ("once", False)):
        model = tiny_model(dgn_dropout=setting)
        assert all(layer.dropout_twice is expected for layer in model.layers)


XAVIER_WHOLE = math.sqrt(6 / (512 + 4 * 1024))  # Xavier bound over the whole [q, k, v, g] matrix, H 512, N·d 1024
XAVIER_BLOCK = math.sqrt(6 / (512 + 1024))  # per q, k, v, g block: 1.73× larger


def test_authors_initialisation_of_the_dgn_layer() -> None:
    torch.manual_seed(0)
    authors = DGNLayer(512, 8, 128, 0.0, 0.0, init="authors")
    depinduce = DGNLayer(512, 8, 128, 0.0, 0.0, init="depinduce")
    assert XAVIER_BLOCK / XAVIER_WHOLE == pytest.approx(1.732, abs=1e-3)
    weight = authors.project.weight.detach()
    assert weight.abs().max() <= XAVIER_WHOLE and weight.abs().max() > 0.999 * XAVIER_WHOLE
    assert weight.std().item() == pytest.approx(XAVIER_WHOLE / math.sqrt(3), rel=0.01)  # uniform: bound / √3
    for block in depinduce.project.weight.detach().chunk(4, dim=0):
        assert XAVIER_WHOLE * 1.7 < block.abs().max() <= XAVIER_BLOCK
    bias = authors.direction_bias.detach()
    assert bias.abs().max() <= 0.1 and bias.abs().max() > 0.05 and bias.unique().numel() == bias.numel()
    assert torch.all(depinduce.direction_bias == 0)
    for layer in (authors, depinduce):
        assert torch.all(layer.project.bias == 0) and torch.all(layer.out.bias == 0)


def test_authors_initialisation_of_the_parser_projection() -> None:
    torch.manual_seed(0)
    authors = HeadSelectiveParser(10, 8, 64, 1, 0.0, init="authors").project
    depinduce = HeadSelectiveParser(10, 8, 64, 1, 0.0, init="depinduce").project
    xavier, default = math.sqrt(6 / (128 + 128)), 1 / math.sqrt(128)  # 2P × 2P; nn.Linear: ±1/√fan_in
    assert torch.all(authors.bias == 0) and 0.99 * xavier < authors.weight.abs().max() <= xavier
    assert depinduce.weight.abs().max() <= default and torch.all(depinduce.bias != 0)
    model = tiny_model()  # the default is the authors'
    assert torch.all(model.parser.project.bias == 0)
    assert all(torch.all(layer.direction_bias != 0) for layer in model.layers)


# ------------------------------------------------------------------------------------------------- model


def test_controller_probabilities_sum_to_one_over_heads_without_dropout() -> None:
    model = tiny_model(dropatt=0.5, dropout=0.5)
    model.train()
    tokens, mask = batch_of([4, 8, 15, 16, 23], [5, 6, 7])
    probs = model.controller_probabilities(tokens, mask)
    assert probs.shape == (2, TINY["n_layers"], TINY["n_heads"], 5, 5)
    assert model.training  # restored
    assert torch.equal(probs, model.controller_probabilities(tokens, mask))  # eval mode: no dropout
    real = (mask[:, :, None] & mask[:, None, :])[:, None, None].expand_as(probs)
    sums = probs.sum(dim=2)
    assert torch.allclose(sums[real[:, :, 0]], torch.tensor(1.0), atol=1e-6)
    assert torch.all(probs[~real] == 0)
    sigmoid = tiny_model(competition="sigmoid").controller_probabilities(tokens, mask)
    assert not torch.allclose(sigmoid.sum(dim=2)[real[:, :, 0]], torch.tensor(1.0), atol=1e-3)


def test_gradients_reach_the_parser_bilstm_through_the_masked_lm_loss() -> None:
    model = tiny_model()
    model.train()
    tokens, mask = batch_of(list(range(3, 12)), list(range(20, 26)))
    objective = MaskedLM(0.4)
    inputs = objective.prepare(tokens, mask, generator=torch.Generator().manual_seed(0))
    assert inputs["masked"].any()
    objective.compute(model, **inputs).loss.backward()
    for name, param in model.parser.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_score_tensors_are_log_distributions_with_the_self_mass_as_root() -> None:
    model = tiny_model().eval()
    tokens, mask = batch_of([4, 8, 15, 16, 23, 5, 6], [30, 7], [9])
    scores = model.score_tensors(tokens, mask)
    p = model.head_distribution(tokens, mask)
    for b, n in enumerate((7, 2, 1)):
        heads = scores[b].heads
        assert heads.shape == (n + 1, n + 1) and scores[b].distances is None and scores[b].heights is None
        assert torch.all(heads[0] == -math.inf) and torch.all(heads[1:, 1:].diagonal() == -math.inf)
        assert torch.isfinite(heads[1:, 0]).all()
        assert torch.allclose(heads[1:, 0].exp(), p[b, :n, :n].diagonal(), atol=1e-6)
        off = ~torch.eye(n, dtype=torch.bool)
        assert torch.allclose(heads[1:, 1:][off].exp(), p[b, :n, :n][off], atol=1e-6)
        assert torch.allclose(heads[1:].logsumexp(-1), torch.zeros(n), atol=1e-5)
        tree = decode_heads(heads.detach(), "mst")
        assert tree_problem(tree) is None and tree.count(0) == 1
        argmax = decode_heads(heads.detach(), "argmax")
        assert len(argmax) == n and all(h != i for i, h in enumerate(argmax, start=1))


def scores_from(p: list[list[float]]) -> ParseScores:
    """The backend's scores for a hand-built p (row = word, column = candidate head, diagonal = self-mass)."""
    logp = torch.tensor(p, dtype=torch.float32).log()
    n = logp.size(0)
    heads = torch.full((n + 1, n + 1), -math.inf)
    heads[1:, 0] = logp.diagonal()
    heads[1:, 1:] = logp
    heads[1:, 1:].fill_diagonal_(-math.inf)
    return ParseScores(heads=heads)


# Word 1 keeps 0.4 of its mass on itself, word 2 only 0.1: depinduce's mst, which scores ROOT → i with
# log p[i, i], roots word 1 (log .4 + log .45 + log .9 = −1.82 against log .1 + log .55 + log .9 = −3.01 for
# root 2); the authors' tree decoder scores every root 0 and compares the word-to-word arcs alone, so word 2,
# which the others depend on most, is the root (log .55 + log .9 = −0.70 against −0.90 for root 1).
ROOT_CASE = [[0.40, 0.55, 0.05],
             [0.45, 0.10, 0.45],
             [0.05, 0.90, 0.05]]


def test_authors_tree_decoder_chooses_the_root_by_word_arcs_alone() -> None:
    scores = scores_from(ROOT_CASE)
    assert decode_heads(scores.heads, "mst") == [0, 1, 2]
    assert UDGN.own_decoders["udgn-tree"].decode(scores) == [2, 0, 2]
    assert UDGN.own_decoders["udgn-tree"].decode(scores_from([[1.0]])) == [0]
    # every tree scores the same: the first word tried as the root wins
    assert UDGN.own_decoders["udgn-tree"].decode(scores_from([[1 / 3] * 3] * 3)).index(0) == 0


def test_authors_tree_decoder_floors_word_arcs_at_1e9() -> None:
    """Their scores are log(p + 1e-9): an arc below 1e-9 costs at most log 1e-9 ≈ −20.7, so the tree pairing a
    1e-12 arc with a 0.9 arc (2 → 3, 3 → 1: −20.8) beats two 1e-5 arcs (2 → 1, 3 → 2: −23.0), which log p ranks
    the other way round (−27.7 against −23.0)."""
    p = [[1.0, 1e-30, 1e-30],
         [1e-5, 0.09999, 0.9],
         [1e-12, 1e-5, 0.99999]]
    assert UDGN.own_decoders["udgn-tree"].decode(scores_from(p)) == [0, 3, 1]
    assert decode_heads(scores_from(p).heads, "mst") == [0, 1, 2]


def _authors_objective(p: torch.Tensor, heads: list[int]) -> float:
    w = torch.log(p.float() + 1e-9).double()
    return sum(float(w[i, h - 1]) for i, h in enumerate(heads) if h)


def test_authors_tree_decoder_is_their_objective_over_all_trees() -> None:
    """Against enumeration: the best sum of log(p + 1e-9) over the word arcs (ROOT arcs 0), the leftmost root on
    ties — including rows so sharp that their arcs sit at the 1e-9 floor, where log p itself would rank them."""
    rng = torch.Generator().manual_seed(3)
    for trial in range(12):
        n = 2 + trial % 4
        logits = torch.randn(n, n, generator=rng) * (30.0 if trial % 3 == 0 else 2.0)
        p = logits.softmax(-1)
        p_off = p.masked_fill(torch.eye(n, dtype=torch.bool), 0.0)
        trees = [list(h) for h in itertools.product(range(n + 1), repeat=n) if tree_problem(list(h)) is None]
        best = max(_authors_objective(p_off, t) for t in trees)
        leftmost = min(t.index(0) for t in trees if _authors_objective(p_off, t) == best)
        got = authors_tree(p_off.numpy())
        assert _authors_objective(p_off, got) == pytest.approx(best, abs=1e-9) and got.index(0) == leftmost


def test_authors_argmax_never_attaches_to_root() -> None:
    p = [[0.90, 0.06, 0.04],  # mostly self-mass: depinduce's argmax puts word 1 on ROOT
         [0.40, 0.20, 0.40],  # a tie between words 1 and 3: the first wins
         [0.30, 0.10, 0.60]]
    scores = scores_from(p)
    assert decode_heads(scores.heads, "argmax") == [0, 1, 0]
    assert UDGN.own_decoders["udgn-argmax"].decode(scores) == [2, 1, 1]
    assert UDGN.own_decoders["udgn-argmax"].decode(scores_from([[1.0]])) == [0]  # one word: its own argmax
    # rows whose mass on the other words is 0: numpy's first index, word 1 — ROOT for word 1 itself
    assert UDGN.own_decoders["udgn-argmax"].decode(scores_from([[1.0, 0.0], [0.0, 1.0]])) == [0, 1]


def test_a_sentence_does_not_depend_on_its_batch_mates() -> None:
    model = tiny_model()
    model.eval()
    short = [5, 9, 13, 2, 7]
    alone_tokens, alone_mask = batch_of(short)
    batch_tokens, batch_mask = batch_of(list(range(3, 14)), short, [4, 4, 4])
    n = len(short)
    with torch.no_grad():
        hidden_alone = model.encode(alone_tokens, alone_mask)[0]
        hidden_batch = model.encode(batch_tokens, batch_mask)[1, :n]
    assert torch.allclose(hidden_alone, hidden_batch, atol=1e-5)
    controller_alone = model.controller_probabilities(alone_tokens, alone_mask)[0]
    controller_batch = model.controller_probabilities(batch_tokens, batch_mask)[1, :, :, :n, :n]
    assert torch.allclose(controller_alone, controller_batch, atol=1e-5)


def test_config_errors_are_one_line() -> None:
    for values, problem in (
        ({"n_heads": 0}, "n_heads must be a positive integer"),
        ({"competition": "max"}, "competition must be one of softmax, sigmoid, not 'max'"),
        ({"activation": "relu"}, "activation must be one of tanh, identity, not 'relu'"),
        ({"dropatt": 1.0}, "dropatt must be in [0, 1)"),
        ({"gates": "no"}, "gates must be true or false"),
        ({"dgn_dropout": "thrice"}, "dgn_dropout must be one of twice, once, not 'thrice'"),
        ({"init": "kaiming"}, "init must be one of authors, depinduce, not 'kaiming'"),
        ({"graph_floor": -1e-6}, "graph_floor must be in [0, 1)"),
    ):
        with pytest.raises(DepinduceError) as caught:
            UDGNConfig(**values)
        assert problem in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(DepinduceError, match="model_config.competition must be one of"):
        resolve_config(model_name="udgn", model_config_class=UDGNConfig, recipe={"model_config": {"competition": 1}})
    defaults = UDGNConfig()
    assert (defaults.hidden_size, defaults.n_layers, defaults.n_heads, defaults.head_size) == (512, 8, 8, 128)
    assert (defaults.parser_layers, defaults.parser_hidden_size, defaults.dropout, defaults.dropatt) == (3, 512, 0.2,
                                                                                                         0.1)
    assert (defaults.dgn_dropout, defaults.init) == ("twice", "authors")  # the authors' code
    assert defaults.graph_floor == 0.0  # equation 11 (the authors' 1e-6: the paper recipe)


@pytest.mark.parametrize("name", ["udgn-ptb.yaml", "udgn-ptb-cpu.yaml", "udgn-ud-cpu.yaml"])
def test_recipes_load(name: str) -> None:
    recipe = load_recipe(REPO / "depinduce" / "recipes" / name)
    config = resolve_config(model_name=None, model_config_class=UDGNConfig, recipe=recipe, where=name)
    train = config.train.flat()  # as the recipe writes them
    if name == "udgn-ptb.yaml":
        assert config.model_config["n_layers"] == 8 and config.model_config["head_size"] == 128
        assert (train["lr"], train["clip"], train["select"]) == (1e-3, 0.25, "dev_ppl")
        assert (config.model_config["dgn_dropout"], config.model_config["init"]) == ("twice", "authors")
        assert config.model_config["graph_floor"] == 1e-6  # the authors' log(m + 1e-6)
        assert train["decoder"] == "udgn-tree"  # the paper's DDA
    else:
        assert train["select"] == "dev_uda"


def test_train_then_parse_text_end_to_end(tmp_path: Path) -> None:
    data = make_data(tmp_path / "data", n_train=60, n_dev=12)
    run = tmp_path / "run"
    runner = CliRunner()
    shrink = [f"model_config.{key}={value}" for key, value in TINY.items()]
    trained = runner.invoke(cli, [
        "train", "--recipe", str(REPO / "depinduce" / "recipes" / "udgn-ptb-cpu.yaml"), "--data", str(data), "--out", str(run),
        "--quiet", "--threads", "1", *itertools.chain.from_iterable(("--set", s) for s in shrink),
        "--set", "train.epochs=1", "--set", "train.batch_tokens=200", "--set", "train.eval_every=0",
        "--set", "train.decoder=udgn-tree",
    ])
    assert trained.exit_code == 0, trained.output
    assert (run / "model.pt").is_file() and "dev_uda" in (run / "metrics.jsonl").read_text()

    text = "The dog saw a cat near the river.\nEvery child knew the old man!\n"
    for decoder in ("mst", "argmax", "udgn-tree", "udgn-argmax"):
        parsed = runner.invoke(cli, ["parse", "--model", str(run), "--decoder", decoder, "--quiet", "-"], input=text)
        assert parsed.exit_code == 0, parsed.output
        sentences = conllu.parse(parsed.stdout)
        assert [len(s) for s in sentences] == [9, 7]
        if decoder in ("mst", "udgn-tree"):
            for sentence in sentences:
                heads = [t["head"] for t in sentence]
                assert heads.count(0) == 1 and tree_problem(heads) is None


def test_recomputed_bilstm_layers_give_the_same_gradients() -> None:
    torch.manual_seed(0)
    lstm = BiLSTM(6, 5, n_layers=2, dropout=0.0)
    x = torch.randn(3, 7, 6)
    tokens, mask = pad_batch([[1] * 7, [1] * 4, [1] * 2], 0)
    grads = []
    for recompute in (False, True):
        lstm.recompute = recompute
        lstm.zero_grad()
        inputs = x.clone().requires_grad_()
        out = lstm(inputs, mask)
        (out * mask[:, :, None]).pow(2).sum().backward()
        grads.append([inputs.grad.clone()] + [p.grad.clone() for p in lstm.parameters()])
    for plain, recomputed in zip(*grads):
        assert torch.allclose(plain, recomputed, atol=1e-6)


def test_recompute_switches_change_memory_not_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    """recompute_lstm / recompute_heads: forced on, forced off, and auto on a machine short of memory all give
    the same loss and gradients."""
    tokens, mask = batch_of([5, 6, 7, 8, 9], [6, 7, 8])
    masked = torch.zeros_like(mask)
    masked[:, 1] = True
    results = []
    for setting in (True, False, "auto"):
        if setting == "auto":
            monkeypatch.setattr("depinduce.models.layers.memory.available_bytes", lambda: 1)
        torch.manual_seed(0)
        model = tiny_model(recompute_lstm=setting, recompute_heads=setting, dropout=0.3, dropatt=0.2).train()
        torch.manual_seed(7)  # the same dropout masks
        loss = MaskedLM(mask_rate=0.3).compute(model, tokens=tokens, mask=mask, masked=masked).loss
        results.append((loss, torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)))
    for loss, grads in results[1:]:
        assert torch.allclose(loss, results[0][0], atol=1e-6)
        for a, b in zip(grads, results[0][1]):
            assert (a is None and b is None) or torch.allclose(a, b, atol=1e-5)
    with pytest.raises(DepinduceError, match="recompute_heads must be true, false or auto, not 'sometimes'"):
        tiny_model(recompute_heads="sometimes")


# ------------------------------------------------------------------------------------------ dropout placement


def test_dropout_applies_where_the_authors_code_applies_it() -> None:
    """The authors' UDGN drops, in this order: the parser's embedding, the BiLSTM's outputs between its layers
    (``nn.LSTM(dropout=…)``) and after it, the word embedding, then per layer the controller weights (dropatt),
    the concatenated messages and the projected output (``dgn_dropout: twice``), and the states before the
    output layer (here at the masked positions only).  scripts/check_authors.py compares the masks themselves
    with theirs; this pins the list without their code."""
    model = tiny_model(dropout=0.2, dropatt=0.1)
    model.train()
    tokens, mask = batch_of([3, 4, 5, 6, 7], [8, 9, 10])
    masked = torch.zeros_like(mask)
    masked[0, 1] = masked[1, 2] = True
    shapes = drawn_dropout_masks(lambda: MaskedLM(0.3).compute(model, tokens=tokens, mask=mask, masked=masked))
    b, t, hidden, parser = 2, 5, TINY["hidden_size"], 2 * TINY["parser_hidden_size"]
    heads, width = TINY["n_heads"], TINY["n_heads"] * TINY["head_size"]
    parser_masks = [(b, t, hidden), *[(b, t, parser)] * (TINY["parser_layers"] - 1), (b, t, parser)]
    layer_masks = [(b, heads, t, t), (b, t, width), (b, t, hidden)]
    assert shapes == [*parser_masks, (b, t, hidden), *layer_masks * TINY["n_layers"], (2, hidden)]
    once = tiny_model(dropout=0.2, dropatt=0.1, dgn_dropout="once")
    once.train()
    shapes = drawn_dropout_masks(lambda: MaskedLM(0.3).compute(once, tokens=tokens, mask=mask, masked=masked))
    assert shapes == [*parser_masks, (b, t, hidden), *layer_masks[:2] * TINY["n_layers"], (2, hidden)]


def test_bundled_model_config_names_the_settings_it_was_trained_with() -> None:
    """The bundled model (depinduce/bundled/default, trained at commit 628f76d, before ``dgn_dropout``, ``init``
    and ``graph_floor`` existed) was trained with what the code did then: one dropout per DGN layer, Xavier per
    q/k/v/g block with zero direction biases and torch's default parser projection, and m itself as the
    controller's weight.  Its config.yaml says so, so that a reload does not report today's defaults (the
    authors' ``twice`` and ``authors``) as its training settings; every other switch of the network is there
    too (implementation choices that leave the numbers unchanged aside)."""
    from dataclasses import fields
    from importlib.resources import files

    import yaml

    saved = yaml.safe_load((files("depinduce") / "bundled" / "default" / "config.yaml").read_text())
    model_config = saved["model_config"]
    assert (model_config["dgn_dropout"], model_config["init"], model_config["graph_floor"]) == (
        "once", "depinduce", 0.0)
    implementation = {"recompute_lstm", "recompute_heads"}
    assert {f.name for f in fields(UDGNConfig)} - implementation <= set(model_config)
