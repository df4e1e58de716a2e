"""PRPN: the parser's tree, the gates, the reading/predict networks against straightforward re-implementations,
causality, padding and chunking invariance, and training / parsing / perplexity end to end."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from depinduce.cli.main import cli
from depinduce.data.vocab import Vocab
from depinduce.errors import DepinduceError
from depinduce.models.neural import pad_batch
from depinduce.models.prpn import PRPN
from depinduce.models.prpn import reading
from depinduce.models.prpn.config import PRPNConfig
from depinduce.models.prpn.norm import AuthorsLayerNorm
from depinduce.models.prpn.parsing import stick_breaking_gates
from depinduce.models.prpn.reading import PredictNetwork, ReadingLayer, gated_attention
from depinduce.structures.spans import (
    binary_tree_from_distances, labelled_spans, word_depths_to_split_distances,
)
from depinduce.training.gradient import GradientLoop
from depinduce.training.config import load_recipe, resolve_config
from depinduce.training.engine import TrainOptions, train
from training_support import REPO, make_data, one_thread  # noqa: F401

TINY = {"emb_size": 12, "hidden_size": 16, "n_layers": 2, "n_slots": 4, "lookback": 2}


def tiny_model(**overrides: object) -> PRPN:
    torch.manual_seed(0)
    return PRPN(PRPNConfig(**{**TINY, **overrides}), Vocab([f"w{i}" for i in range(40)]))


# ------------------------------------------------------------------------------------------- the tree


def paper_tree_spans(depths: list[int]) -> set[tuple[int, int]]:
    """The paper's appendix-A parser written out literally: split at the deepest word k (leftmost on ties) into
    (w_<k) and (w_k (w_>k)), recursively; returns the spans of every node."""
    spans: set[tuple[int, int]] = set()

    def build(a: int, b: int) -> None:
        if b - a < 2:
            return
        spans.add((a, b))
        segment = depths[a:b]
        k = a + segment.index(max(segment))
        build(a, k)
        if b - k >= 2:
            spans.add((k, b))  # (w_k (w_>k))
            build(k + 1, b)

    build(0, len(depths))
    return spans


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=12))
def test_split_distances_reproduce_the_papers_tree_including_ties(depths: list[int]) -> None:
    words = [f"w{i}" for i in range(len(depths))]
    tree = binary_tree_from_distances(words, word_depths_to_split_distances([float(d) for d in depths]))
    assert {(a, b) for _, a, b in labelled_spans(tree) if b - a > 1} == paper_tree_spans(depths)


def test_paper_tree_by_hand() -> None:
    # deepest word 2: (w0 w1) (w2 (w3 w4)); the right part detaches its first word
    words = ["a", "b", "c", "d", "e"]
    tree = binary_tree_from_distances(words, word_depths_to_split_distances([0.1, 0.3, 0.9, 0.2, 0.5]))
    assert str(tree) == "( ( a b) ( c ( d e)))"


# ------------------------------------------------------------------------------------------- the gates


@pytest.mark.parametrize("hard", [True, False])
def test_gates_are_the_stick_breaking_products(hard: bool) -> None:
    torch.manual_seed(1)
    batch, length, slots, r = 2, 6, 3, 0.1
    distances = torch.rand(batch, length) * 0.3
    query = torch.rand(batch, length) * 0.3
    previous = torch.full((batch, slots), float("inf"))
    got = stick_breaking_gates(query, distances, previous, resolution=r, hard=hard)

    def alpha(a: float, b: float) -> float:
        if b == math.inf:
            return 0.0
        x = (a - b) / r
        return min(1.0, max(0.0, 1.0 + x)) if hard else 1.0 / (1.0 + math.exp(-(10.0 * x + 5.0)))

    for b, t, k in itertools.product(range(batch), range(length), range(slots)):
        product = 1.0
        for j in range(k + 1):  # slot k = token t-1-k: every gap d_(t-j), j = 0..k, against the query
            product *= alpha(float(query[b, t]), float(distances[b, t - j]) if t - j >= 0 else math.inf)
        assert got[b, t, k].item() == pytest.approx(product, abs=1e-6)
    if hard:  # the reading gate of the newest slot compares d_t with itself: always open
        assert torch.all(stick_breaking_gates(distances, distances, previous, resolution=r, hard=True)[..., 0] == 1)


# ---------------------------------------------------------------------------- reading and predicting


def reference_reading(layer: ReadingLayer, x: torch.Tensor, gates: torch.Tensor) -> torch.Tensor:
    """The reading layer step by step as the paper writes it (eqs. 9-12 and an LSTM update), one tape tensor:
    :func:`reference_reading_dropped` with no dropout site."""
    return reference_reading_dropped(layer, x, gates, None, ())


def test_reading_layer_matches_the_step_by_step_equations() -> None:
    torch.manual_seed(2)
    layer = ReadingLayer(5, 6, dropout=0.0, rdropout=0.0)
    x = torch.randn(3, 7, 5)
    distances = torch.rand(3, 7)
    gates = stick_breaking_gates(distances, distances, torch.full((3, 4), float("inf")), resolution=0.1, hard=True)
    got, tape = layer(x, gates, None)
    assert torch.allclose(got, reference_reading(layer, x, gates), atol=1e-5)
    assert torch.allclose(tape[:, -1, :6], got[:, -1])  # the tape ends with the last state, oldest first


def test_predict_network_attends_over_the_previous_states_only() -> None:
    torch.manual_seed(3)
    net = PredictNetwork(6, 5, dropout=0.0).eval()
    top = torch.randn(2, 5, 6)
    gates = torch.rand(2, 5, 3)
    rows = torch.ones(2, 5, dtype=torch.bool)
    got = net(top, gates, rows, None)
    padded = torch.cat([torch.zeros(2, 3, 6), top], dim=1)
    expected = []
    for b, t in itertools.product(range(2), range(5)):
        memory = torch.stack([padded[b, 3 + t - 1 - k] for k in range(3)])  # h_(t-1-k), newest first
        key = net.key(top[b, t])
        scores = memory @ key / math.sqrt(6)
        weights = torch.exp(scores - scores.max()) * gates[b, t]
        weights = weights / (weights.sum() + 1e-8)
        expected.append(torch.cat([top[b, t], weights @ memory]))
    reference = torch.tanh(net.norm(net.project(torch.stack(expected))))
    assert torch.allclose(got.flatten(0, 1), reference, atol=1e-5)


def test_gated_attention_is_normalised_as_the_authors_even_for_a_tiny_gated_mass() -> None:
    # the only open slot holds e^-20 of the softmax mass: e^(x − max)·g / (Σ + 1e-8) keeps it at 0.17, where
    # renormalising softmax·g with + 1e-6 would give 0.002
    logits = torch.tensor([[0.0, -20.0], [0.0, math.log(2.0)]], dtype=torch.float64)
    gates = torch.tensor([[0.0, 1.0], [1.0, 0.5]], dtype=torch.float64)
    got = gated_attention(logits, gates)
    tiny = math.exp(-20.0)
    assert got[0].tolist() == pytest.approx([0.0, tiny / (tiny + 1e-8)], rel=1e-12)
    assert got[1].tolist() == pytest.approx([0.5 / (1 + 1e-8), 0.5 / (1 + 1e-8)], rel=1e-12)
    assert gated_attention(logits, torch.zeros_like(gates)).abs().max().item() == 0.0  # every slot closed


def test_authors_layer_norm_is_the_hand_computation() -> None:
    norm = AuthorsLayerNorm(4).double()
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([1.0, 2.0, 1.0, 1.0]))
        norm.bias.copy_(torch.tensor([0.0, 0.0, 0.0, 0.5]))
    # mean 3, deviations (−2, −1, 0, 3), unbiased variance 14/3
    got = norm(torch.tensor([[1.0, 2.0, 3.0, 6.0]], dtype=torch.float64))[0].tolist()
    sigma = math.sqrt(14.0 / 3.0) + 1e-6
    assert got == pytest.approx([-2.0 / sigma, -2.0 / sigma, 0.0, 3.0 / sigma + 0.5], rel=1e-12)
    # a nearly constant input: unbiased σ = 2e-6, ε = 1e-6 outside the root (torch's ε = 1e-5 inside would
    # flatten it to ~1e-3)
    flat = norm(torch.tensor([[0.0, 0.0, 0.0, 4e-6]], dtype=torch.float64))[0].tolist()
    assert flat == pytest.approx([-1.0 / 3.0, -2.0 / 3.0, -1.0 / 3.0, 1.5], rel=1e-9)


def test_layer_norm_switch_picks_the_norm_and_keeps_checkpoints_loadable() -> None:
    torch_model, authors_model = tiny_model(), tiny_model(layer_norm="authors")
    for reader in authors_model.readers:
        assert all(isinstance(m, AuthorsLayerNorm) for m in (reader.ih_norm, reader.hh_norm, reader.c_norm))
    assert all(isinstance(reader.c_norm, torch.nn.LayerNorm) for reader in torch_model.readers)
    authors_model.load_state_dict(torch_model.state_dict())  # same parameter names


def _value_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """A deterministic stand-in for dropout whose mask depends on the values only: a tensor dropped twice gets one
    mask, different tensors get unrelated masks — so where a mask is drawn shows in the result."""
    if not training or p == 0.0:
        return x
    keep = torch.frac(x.abs() * 1e4) >= p
    return torch.where(keep, x / (1.0 - p), torch.zeros_like(x))


READING_SITES = ("lstm_input", "key_x", "key_h", "key_out")


def reference_reading_dropped(layer: ReadingLayer, x: torch.Tensor, gates: torch.Tensor,
                              masks: torch.Tensor | None, sites: tuple[str, ...]) -> torch.Tensor:
    """The authors' reading layer step by step with dropout at the named sites: ``_value_dropout`` on the LSTM
    input (rate ``dropout``) and the key's x_t (rate ``key_dropout``), the masks ``masks[0]``, ``masks[1]``
    (B, T, H) on the key's h_(t−1) and on the key."""
    def drop(site: str, v: torch.Tensor, p: float) -> torch.Tensor:
        return _value_dropout(v, p, True) if site in sites else v

    batch, length, _ = x.shape
    size, slots = layer.hidden_size, gates.shape[-1]
    h_tape = x.new_zeros(batch, slots, size)
    c_tape = x.new_zeros(batch, slots, size)
    outputs = []
    for t in range(length):
        h_last = h_tape[:, 0] * masks[0][:, t] if "key_h" in sites else h_tape[:, 0]
        key = layer.key_x(drop("key_x", x[:, t], layer.key_dropout)) + layer.key_h(h_last)
        key = key * masks[1][:, t] if "key_out" in sites else key
        scores = torch.einsum("bsh,bh->bs", h_tape, key) / math.sqrt(size)
        weights = torch.exp(scores - scores.max(dim=-1, keepdim=True).values) * gates[:, t]
        weights = weights / (weights.sum(-1, keepdim=True) + 1e-8)
        h_att = torch.einsum("bs,bsh->bh", weights, h_tape)
        c_att = torch.einsum("bs,bsh->bh", weights, c_tape)
        z = layer.ih_norm(layer.ih(drop("lstm_input", x[:, t], layer.dropout))) + layer.hh_norm(layer.hh(h_att))
        i, f, o, g = z.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c_att + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(layer.c_norm(c))
        outputs.append(h)
        h_tape = torch.cat([h[:, None], h_tape[:, :-1]], dim=1)
        c_tape = torch.cat([c[:, None], c_tape[:, :-1]], dim=1)
    return torch.stack(outputs, dim=1)


def test_reading_layer_drops_where_the_authors_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "apply_dropout", _value_dropout)
    torch.manual_seed(4)
    layer = ReadingLayer(5, 6, dropout=0.3, rdropout=0.0, key_dropout=0.2, placement="authors").double().train()
    x = torch.randn(3, 7, 5, dtype=torch.float64)
    distances = torch.rand(3, 7, dtype=torch.float64)
    gates = stick_breaking_gates(distances, distances, torch.full((3, 4), math.inf, dtype=torch.float64),
                                 resolution=0.5, hard=True)
    masks = (torch.rand(2, 3, 7, 6, dtype=torch.float64) >= 0.2).double() / 0.8
    monkeypatch.setattr(layer, "key_step_masks", lambda _: (masks[0].unbind(1), masks[1].unbind(1)))
    with torch.no_grad():
        got, _ = layer(x, gates, None)
        assert torch.allclose(got, reference_reading_dropped(layer, x, gates, masks, READING_SITES), atol=1e-10)
        for missing in READING_SITES:  # the comparison sees each of the four dropouts
            partial = tuple(site for site in READING_SITES if site != missing)
            assert not torch.allclose(got, reference_reading_dropped(layer, x, gates, masks, partial), atol=1e-6)

        # depinduce's placement: the key reads the LSTM input's dropped x_t (one mask) and nothing else is dropped
        layer.placement = "depinduce"
        shared, _ = layer(x, gates, None)
        layer.key_dropout = layer.dropout  # the reference then draws the key's x_t mask as the LSTM input's
        assert torch.allclose(shared, reference_reading_dropped(layer, x, gates, masks, ("lstm_input", "key_x")),
                              atol=1e-10)


def test_key_step_masks_are_fresh_dropout_masks() -> None:
    torch.manual_seed(6)
    layer = ReadingLayer(5, 300, dropout=0.0, rdropout=0.0, key_dropout=0.25)
    h_masks, key_masks = layer.key_step_masks(torch.zeros(4, 7, 5))
    assert len(h_masks) == len(key_masks) == 7 and h_masks[0].shape == (4, 300)
    every = torch.stack([*h_masks, *key_masks])
    assert every.unique().tolist() == pytest.approx([0.0, 1 / 0.75])
    assert every.eq(0).float().mean().item() == pytest.approx(0.25, abs=0.01)
    assert not torch.equal(h_masks[0], h_masks[1]) and not torch.equal(h_masks[0], key_masks[0])


@pytest.mark.parametrize("placement", ["authors", "depinduce"])
def test_predict_network_drops_its_key_where_the_placement_says(placement: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "apply_dropout", _value_dropout)
    torch.manual_seed(5)
    net = PredictNetwork(6, 5, dropout=0.3, placement=placement).double().train()
    top = torch.randn(2, 5, 6, dtype=torch.float64)
    gates = torch.rand(2, 5, 3, dtype=torch.float64)
    rows = torch.ones(2, 5, dtype=torch.bool)
    with torch.no_grad():
        got = net(top, gates, rows, None)
        padded = torch.cat([top.new_zeros(2, 3, 6), top], dim=1)
        for key_out in (True, False):
            joined = []
            for b, t in itertools.product(range(2), range(5)):
                memory = torch.stack([padded[b, 3 + t - 1 - k] for k in range(3)])  # h_(t-1-k), newest first
                key = net.key(_value_dropout(top[b, t], 0.3, True))
                key = _value_dropout(key, 0.3, True) if key_out else key
                scores = memory @ key / math.sqrt(6)
                weights = torch.exp(scores - scores.max()) * gates[b, t]
                joined.append(torch.cat([top[b, t], weights / (weights.sum() + 1e-8) @ memory]))
            reference = torch.tanh(net.norm(net.project(_value_dropout(torch.stack(joined), 0.3, True))))
            assert torch.allclose(got.flatten(0, 1), reference, atol=1e-10) == (key_out == (placement == "authors"))


def test_dropout_masks_per_layer_are_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every dropout mask the reading layers and the predict network draw in one training pass of a 4-word
    sentence (5 positions: the boundary and the words), with its rate and shape."""
    module = [""]
    calls: list[tuple[str, float, tuple[int, ...]]] = []

    def recorder(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
        calls.append((module[0], p, tuple(x.shape)))
        return x

    monkeypatch.setattr(reading, "apply_dropout", recorder)
    tokens, mask = pad_batch([[5, 6, 7, 8]], 0)
    expected = {  # per reading layer: the LSTM input, the key's x_t, then the key's h_(t−1) and output per step
        "authors": [("reader0", 0.3, (1, 5, 12)), ("reader0", 0.2, (1, 5, 12)), ("reader0", 0.2, (1, 5, 16)),
                    ("reader0", 0.2, (1, 5, 16)),
                    ("reader1", 0.2, (1, 5, 16)), ("reader1", 0.2, (1, 5, 16)), ("reader1", 0.2, (1, 5, 16)),
                    ("reader1", 0.2, (1, 5, 16)),
                    ("predictor", 0.2, (1, 5, 16)), ("predictor", 0.2, (1, 5, 16)), ("predictor", 0.2, (5, 32))],
        "depinduce": [("reader0", 0.3, (1, 5, 12)), ("reader1", 0.2, (1, 5, 16)),
                      ("predictor", 0.2, (1, 5, 16)), ("predictor", 0.2, (5, 32))],
    }
    for placement, pinned in expected.items():
        model = tiny_model(dropout=0.3, idropout=0.2, dropout_placement=placement).train()
        for name, part in (("reader0", model.readers[0]), ("reader1", model.readers[1]),
                           ("predictor", model.predictor)):
            part.register_forward_pre_hook(lambda *_, name=name: module.__setitem__(0, name))
        calls.clear()
        model.lm_hidden(tokens, mask)
        assert calls == pinned, placement


# ---------------------------------------------------------------------------------------- the model


def test_a_prediction_depends_on_earlier_words_only() -> None:
    model = tiny_model().eval()
    tokens, mask = pad_batch([[5, 6, 7, 8, 9]], 0)
    with torch.no_grad():
        before = model.lm_hidden(tokens, mask)
        changed = tokens.clone()
        changed[0, 3] = 20
        after = model.lm_hidden(changed, mask)
    assert before.shape == (1, 6, 12)
    assert torch.allclose(before[0, :4], after[0, :4], atol=1e-6)  # positions 0..3 have not read word 3
    assert not torch.allclose(before[0, 4:], after[0, 4:])


def test_a_sentence_does_not_depend_on_its_batch_mates() -> None:
    model = tiny_model().eval()
    tokens, mask = pad_batch([[5, 6, 7], [8, 9, 10, 11, 12, 13]], 0)
    with torch.no_grad():
        together = model.lm_hidden(tokens, mask)
        alone = model.lm_hidden(tokens[:1, :3], mask[:1, :3])
        scores = model.score_tensors(tokens, mask)
    assert torch.allclose(together[0, :4], alone[0], atol=1e-6)
    assert [len(s.distances) for s in scores] == [2, 5] and scores[0].heads is None


def test_reading_continuous_text_in_chunks_equals_one_read() -> None:
    model = tiny_model().eval()
    tokens = torch.randint(3, 41, (2, 11))
    with torch.no_grad():
        whole, _ = model.lm_stream(tokens, None)
        first, state = model.lm_stream(tokens[:, :4], None)
        second, state = model.lm_stream(tokens[:, 4:9], state)
        third, _ = model.lm_stream(tokens[:, 9:], state)
    assert torch.allclose(torch.cat([first, second, third], dim=1), whole, atol=1e-5)


def test_tree_options_give_the_papers_or_the_gap_parse() -> None:
    paper, gaps = tiny_model(), tiny_model(tree="distances")
    tokens, mask = pad_batch([[5, 6, 7, 8]], 0)
    with torch.no_grad():
        depths = paper.eval().word_depths(tokens, mask)[0].tolist()
        assert paper.score_tensors(tokens, mask)[0].distances.tolist() == pytest.approx(
            word_depths_to_split_distances(depths))
        assert gaps.eval().score_tensors(tokens, mask)[0].distances.tolist() == pytest.approx(depths[1:])


def test_initialisation_is_the_authors_under_torch_0_3() -> None:
    model = tiny_model()  # emb 12, hidden 16
    for norm in (model.parser.norm, model.predictor.norm):  # BatchNorm scales uniform in [0, 1), not 1
        assert 0.0 <= norm.weight.min().item() and norm.weight.max().item() < 1.0
    reader = model.readers[0]  # the key is one map of [x_t; h_(t−1)]: ±1/√(12 + 16), not ±1/√12 and ±1/√16
    for weight in (reader.key_x.weight, reader.key_x.bias, reader.key_h.weight):
        assert weight.abs().max().item() <= 1 / math.sqrt(28)
    assert reader.key_x.weight.abs().max().item() > 0.9 / math.sqrt(28)
    for head in (model.parser.distance, model.parser.next_distance):  # a grouped conv's bound: all 16 channels
        assert max(head.weight.abs().max().item(), head.bias.abs().max().item()) <= 1 / math.sqrt(16)


def test_depinduce_initialisation_switch_keeps_torchs_defaults_and_the_same_network() -> None:
    authors, model = tiny_model(), tiny_model(init="depinduce")
    for norm in (model.parser.norm, model.predictor.norm):  # torch's BatchNorm scale: 1
        assert torch.equal(norm.weight, torch.ones_like(norm.weight))
    reader = model.readers[0]  # two maps, each with its own fan-in: ±1/√12 and ±1/√16
    assert reader.key_x.weight.abs().max().item() > 1 / math.sqrt(28)
    assert reader.key_x.weight.abs().max().item() <= 1 / math.sqrt(12)
    assert reader.key_h.weight.abs().max().item() <= 1 / math.sqrt(16)
    head = model.parser.distance  # nn.Linear(8, 1): ±1/√8, beyond the authors' ±1/√16
    assert head.weight.abs().max().item() > 1 / math.sqrt(16)
    # only the starting point differs: the same parameters, and authors' weights loaded give the authors' model
    assert authors.state_dict().keys() == model.state_dict().keys()
    model.load_state_dict(authors.state_dict())
    model.eval()
    authors.eval()
    tokens = torch.tensor([[3, 4, 5, 6, 7]])
    mask = torch.ones_like(tokens, dtype=torch.bool)
    distances = [m.score_tensors(tokens, mask)[0].distances for m in (model, authors)]
    assert torch.equal(*distances)
    with pytest.raises(DepinduceError, match="init"):
        PRPNConfig(init="xavier")


def test_gradients_reach_every_parameter_through_the_lm_loss() -> None:
    model = tiny_model(dropout=0.1, idropout=0.1, rdropout=0.1).train()
    tokens, mask = pad_batch([[5, 6, 7, 8], [9, 10]], 0)
    hidden = model.lm_hidden(tokens, mask)
    rows = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    logits = model.output_logits(hidden[rows])
    assert logits.shape == (8, 44) and model.boundary_index == 43  # 3 specials + 40 words, and the boundary
    F.cross_entropy(logits, torch.tensor([5, 6, 7, 8, 43, 9, 10, 43])).backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert missing == []


def test_config_errors_are_one_line() -> None:
    with pytest.raises(DepinduceError, match="prpn: gate must be one of hard, soft"):
        PRPNConfig(gate="sigmoid")
    with pytest.raises(DepinduceError, match="resolution must be a positive number"):
        PRPNConfig(resolution=0)
    with pytest.raises(DepinduceError, match="hidden_size must be even"):
        PRPNConfig(hidden_size=401)
    with pytest.raises(DepinduceError, match="prpn: dropout_placement must be one of authors, depinduce"):
        PRPNConfig(dropout_placement="paper")
    with pytest.raises(DepinduceError, match="prpn: layer_norm must be one of torch, authors"):
        PRPNConfig(layer_norm="rms")


@pytest.mark.parametrize("name", ["prpn-ptb.yaml", "prpn-ptb-cpu.yaml", "prpn-ptb-lm.yaml"])
def test_recipes_load(name: str) -> None:
    recipe = load_recipe(REPO / "depinduce" / "recipes" / name)
    config = resolve_config(model_name=None, model_config_class=PRPNConfig, recipe=recipe, where=name)
    model_config = PRPNConfig(**config.model_config)
    train = config.train.flat()  # as the recipe writes them
    assert (train["beta1"], train["clip"]) == (0.0, 1.0)
    if name != "prpn-ptb-cpu.yaml":  # the paper recipes use the paper settings
        assert (model_config.dropout_placement, model_config.layer_norm) == ("authors", "authors")
    # structure sooner (README): the CPU recipe starts from torch's initialisation, no recipe has a curriculum
    assert model_config.init == ("depinduce" if name == "prpn-ptb-cpu.yaml" else "authors")
    assert train["curriculum_start"] is None
    if name == "prpn-ptb-lm.yaml":
        assert (train["lm_mode"], train["bptt"], train["select"]) == ("continuous", 35, "dev_ppl")
        assert model_config.emb_size == 800 and model_config.hidden_size == 1200
    else:
        assert train["lm_mode"] == "sentences" and train["select"] == "dev_uf1"
        assert (model_config.emb_size, model_config.hidden_size, model_config.n_slots) == (200, 400, 15)


# ------------------------------------------------------------------------------------------ end to end


def _shrink(*extra: str) -> list[str]:
    sets = [f"model_config.{key}={value}" for key, value in TINY.items()] + list(extra)
    return list(itertools.chain.from_iterable(("--set", s) for s in sets))


def test_train_parse_eval_end_to_end(tmp_path: Path) -> None:
    data = make_data(tmp_path / "data", n_train=80, n_dev=12)
    run = tmp_path / "run"
    runner = CliRunner()
    trained = runner.invoke(cli, [
        "train", "--recipe", str(REPO / "depinduce" / "recipes" / "prpn-ptb-cpu.yaml"), "--data", str(data), "--out", str(run),
        "--quiet", "--threads", "1",
        *_shrink("train.epochs=2", "train.batch_tokens=200", "train.eval_every=0"),
    ])
    assert trained.exit_code == 0, trained.output
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r["dev_uf1"] is not None and r["dev_ppl"] > 1 for r in records)

    text = "The dog saw a cat near the river.\nEvery child knew the old man!\n"
    brackets = runner.invoke(cli, ["parse", "--model", str(run), "--format", "brackets", "--quiet", "-"], input=text)
    assert brackets.exit_code == 0, brackets.output
    lines = brackets.stdout.splitlines()
    assert len(lines) == 2 and lines[0].count("(") == 7  # binary: 7 nodes over 8 visible words (period attached)

    predicted = tmp_path / "dev.pred.trees"
    parsed = runner.invoke(cli, ["parse", "--model", str(run), "--tokenized", "--format", "brackets", "--quiet",
                                 str(data / "dev.txt")])
    predicted.write_text(parsed.stdout)
    scored = runner.invoke(cli, ["eval", "--gold", str(data / "dev.trees"), "--pred", str(predicted), "--json"])
    assert scored.exit_code == 0, scored.output
    report = json.loads(scored.stdout)
    best = max(records, key=lambda r: r["dev_uf1"])
    assert report["metrics"]["uf1_sentence"] == pytest.approx(best["dev_uf1"], abs=1e-6)
    assert "NP" in report["constituency"]["label_recall"]  # per-label recall for the NP, VP, PP

    measured = runner.invoke(cli, ["perplexity", "--model", str(run), "--json", "--quiet", str(data / "dev.txt")])
    assert measured.exit_code == 0, measured.output
    figures = json.loads(measured.stdout)
    assert figures["objective"] == "lm" and figures["sentences"] == 12
    assert figures["perplexity"] == pytest.approx(best["dev_ppl"], rel=1e-5)


def test_continuous_mode_trains_resumes_exactly_and_reports_perplexity(tmp_path: Path, one_thread,  # noqa: F811
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    data = make_data(tmp_path / "data", n_train=60, n_dev=10, gold_dev=False)
    settings_ = ["lm_mode=continuous", "bptt=6", "batch_tokens=24", "epochs=2", "lr=3e-3", "dev_parse=false",
                 "select=dev_ppl", *[f"model_config.{k}={v}" for k, v in TINY.items()]]
    reference = tmp_path / "reference"
    result = train(TrainOptions(data_dir=data, run_dir=reference, model="prpn", overrides=tuple(settings_),
                                threads=1, seed=3, quiet=True), log=lambda _: None)
    assert result.reason == "completed" and result.step > 10

    # stop after 7 steps (mid first epoch, the carried state non-zero), then resume
    run = tmp_path / "run"
    original = GradientLoop._stop_reason
    monkeypatch.setattr(GradientLoop, "_stop_reason",
                        lambda self: "signal" if self.progress.step == 7 else original(self))
    stopped = train(TrainOptions(data_dir=data, run_dir=run, model="prpn", overrides=tuple(settings_), threads=1,
                                 seed=3, quiet=True), log=lambda _: None)
    assert stopped.reason == "signal" and stopped.step == 7
    saved = torch.load(run / "last.pt", map_location="cpu", weights_only=True)
    assert saved["objective"][0]["train"]  # the streams' state is in the checkpoint
    monkeypatch.setattr(GradientLoop, "_stop_reason", original)
    resumed = train(TrainOptions(data_dir=data, run_dir=run, resume=True, threads=1, quiet=True), log=lambda _: None)
    assert resumed.reason == "completed" and resumed.step == result.step
    a = torch.load(reference / "last.pt", map_location="cpu", weights_only=True)["model"]
    b = torch.load(run / "last.pt", map_location="cpu", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)

    runner = CliRunner()
    measured = runner.invoke(cli, ["perplexity", "--model", str(reference), "--json", "--quiet",
                                   str(data / "dev.txt")])
    assert measured.exit_code == 0, measured.output
    figures = json.loads(measured.stdout)
    records = [json.loads(line) for line in (reference / "metrics.jsonl").read_text().splitlines()]
    best = min(records, key=lambda r: r["dev_ppl"])
    assert figures["objective"] == "lm-continuous"
    assert figures["perplexity"] == pytest.approx(best["dev_ppl"], rel=1e-5)


def test_continuous_mode_is_refused_for_a_masked_lm(tmp_path: Path) -> None:
    data = make_data(tmp_path / "data", n_train=20, n_dev=5, gold_dev=False)
    runner = CliRunner()
    result = runner.invoke(cli, ["train", "--model", "structformer", "--data", str(data), "--out",
                                 str(tmp_path / "run"), "--quiet", "--set", "lm_mode=continuous",
                                 "--set", "curriculum_start=null"])  # the CPU recipe's curriculum clashes first
    assert result.exit_code == 2 and "needs a next-word language model" in result.output


def test_perplexity_errors_are_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(cli, ["perplexity", "--model", str(tmp_path), str(tmp_path / "x.txt")])
    assert missing.exit_code == 2 and "not a run directory" in missing.output


# ------------------------------------------------------------------------------ the route a GPU takes


def test_masked_batch_norm_is_batch_norm_over_the_marked_rows() -> None:
    """Output at the marked positions, running statistics (momentum and cumulative) and gradients equal
    ``nn.BatchNorm1d`` applied to ``x[mask]``; evaluation uses the running statistics as there."""
    from depinduce.models.layers.masked_norm import masked_batch_norm

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 4, dtype=torch.float64, generator=generator, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.bool)
    for momentum in (0.1, None):
        plain = torch.nn.BatchNorm1d(4, momentum=momentum).double()
        torch.nn.init.uniform_(plain.weight, generator=generator)
        torch.nn.init.uniform_(plain.bias, generator=generator)
        masked = torch.nn.BatchNorm1d(4, momentum=momentum).double()
        masked.load_state_dict(plain.state_dict())
        for _ in range(2):
            want = plain(x[mask])
            got = masked_batch_norm(x, mask, masked)
            torch.testing.assert_close(got[mask], want, rtol=0, atol=1e-12)
            upstream = torch.randn(want.shape, dtype=torch.float64, generator=generator)
            spread = torch.zeros(got.shape, dtype=torch.float64).masked_scatter(mask.unsqueeze(-1), upstream)
            for a, b in zip(torch.autograd.grad(got, (x, masked.weight, masked.bias), spread),
                            torch.autograd.grad(want, (x, plain.weight, plain.bias), upstream)):
                torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
        for name, value in plain.state_dict().items():
            torch.testing.assert_close(masked.state_dict()[name], value, rtol=0, atol=1e-12)
        plain.eval(), masked.eval()
        torch.testing.assert_close(masked_batch_norm(x, mask, masked)[mask], plain(x[mask]), rtol=0, atol=1e-12)


def _prpn_step(model: PRPN, *, stream: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Next-word NLL and gradients of one training pass (no dropout): sentences of several lengths, or a
    continuous chunk read after a first one (the carried state)."""
    model.train()
    model.zero_grad(set_to_none=True)
    if stream:
        tokens = torch.randint(4, 40, (3, 6), generator=torch.Generator().manual_seed(1))
        _, state = model.lm_stream(tokens, None)
        hidden, _ = model.lm_stream(tokens.flip(-1), state)
        targets = tokens.roll(-1, dims=1)
    else:
        tokens, mask = pad_batch([[5, 6, 7, 8, 9, 10], [11, 12], [13, 14, 15, 16]], 0)
        hidden = model.lm_hidden(tokens, mask)[:, :-1]
        targets = tokens.masked_fill(~mask, -100)
    logits = F.linear(*model.output_layer(hidden))
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("gate", ["soft", "hard"])
def test_the_device_route_computes_the_cpu_routes_loss_gradients_and_statistics(stream: bool, gate: str) -> None:
    """BatchNorm over the real positions by masked sums and the gates' cumulative product by its zero-safe
    backward (the route a GPU takes) instead of selecting positions and torch's backward: the same loss,
    gradients and running statistics to round-off (float64)."""
    from depinduce.models.layers.kernels import device_route

    model = tiny_model(dropout=0.0, idropout=0.0, rdropout=0.0, gate=gate).double()
    start = {k: v.clone() for k, v in model.state_dict().items()}
    cpu_loss, cpu_grads = _prpn_step(model, stream=stream)
    cpu_state = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(start)
    with device_route():
        loss, grads = _prpn_step(model, stream=stream)
    torch.testing.assert_close(loss, cpu_loss, rtol=1e-12, atol=0)
    for got, want in zip(grads, cpu_grads):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)
    for name, value in cpu_state.items():
        torch.testing.assert_close(model.state_dict()[name], value, rtol=1e-12, atol=1e-12)
    assert not torch.equal(cpu_state["parser.norm.running_mean"], start["parser.norm.running_mean"])


def test_a_gpu_training_step_never_reads_the_host() -> None:
    """Forward, loss and backward of the static-shape next-word step on the route a CUDA device takes:
    no ``_local_scalar_dense`` or ``nonzero`` (a boolean selection) anywhere."""
    from torch.profiler import ProfilerActivity, profile

    from depinduce.models.layers.kernels import device_route
    from depinduce.training.objectives import NextWordLM
    from depinduce.training.shapes import StaticLoss, pad_inputs

    model = tiny_model().train()
    tokens, mask = pad_batch([[5, 6, 7, 8, 9, 10], [11, 12], [13, 14, 15, 16]], 0)
    inputs = pad_inputs("lm", NextWordLM(41).prepare(tokens, mask), 0, pad_rows=False)
    step = StaticLoss(model, "lm", mask_index=1, boundary_index=model.boundary_index)
    with device_route():
        step(**inputs)[0].backward()
        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            step(**inputs)[0].backward()
    found = [e.name for e in profiler.events() if e.name in ("aten::_local_scalar_dense", "aten::nonzero")]
    assert found == []
