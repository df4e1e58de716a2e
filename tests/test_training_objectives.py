"""The training objectives: masked LM exactly as docs/models-reference.md says, next-word LM and supervised heads/labels
through their hooks (tiny dummy modules defined here)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from depinduce.data.vocab import Vocab
from depinduce.errors import DepinduceError
from depinduce.training.batching import TokenStream
from depinduce.training.objectives import (
    HeadsAndLabels, LossModule, MaskedLM, NextWordLM, StreamLM, draw_mask, fixed_masks, objective_for,
)

PAD, UNK, MASK = Vocab.pad_index, Vocab.unk_index, Vocab.mask_index


class RecordingMLM(torch.nn.Module):
    """A masked-LM stand-in that records what the objective hands it."""

    def __init__(self, vocab_size: int = 20, hidden: int = 6) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab_size, hidden)
        self.inputs: torch.Tensor | None = None
        self.hidden: torch.Tensor | None = None
        self.logit_rows: torch.Tensor | None = None
        self.penalty: torch.Tensor | None = None

    def encode(self, tokens, mask):
        self.inputs = tokens.clone()
        self.hidden = self.embed(tokens) * 2.0
        return self.hidden

    def output_logits(self, hidden):
        self.logit_rows = hidden.detach().clone()
        return hidden @ self.embed.weight.t()

    def regularizer(self):
        return self.penalty


def _batch(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, rows))
    tokens = torch.full((len(rows), width), PAD)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for b, row in enumerate(rows):
        tokens[b, : len(row)] = torch.tensor(row)
        mask[b, : len(row)] = True
    return tokens, mask


def test_mask_rate_statistics_and_never_unk_or_padding() -> None:
    generator = torch.Generator().manual_seed(0)
    rows = [[UNK if (i * 7 + j) % 5 == 0 else 3 + (i + j) % 15 for j in range(1 + i % 30)] for i in range(400)]
    tokens, mask = _batch(rows)
    masked = draw_mask(tokens, mask, 0.3, generator)
    assert not masked[~mask].any(), "padding was masked"
    assert not masked[tokens == UNK].any(), "<unk> was masked"
    eligible = mask & (tokens != UNK)
    rate = masked.sum().item() / eligible.sum().item()
    n = eligible.sum().item()
    assert abs(rate - 0.3) < 4 * math.sqrt(0.3 * 0.7 / n), rate  # within 4 standard deviations
    # independence: the share masked right after a masked token is the same rate
    pairs = eligible[:, 1:] & eligible[:, :-1]
    after_masked = (masked[:, 1:] & masked[:, :-1] & pairs).sum().item() / (masked[:, :-1] & pairs).sum().item()
    assert abs(after_masked - 0.3) < 0.05


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(min_value=1, max_value=19), min_size=1, max_size=12), min_size=1, max_size=6),
       st.floats(min_value=0.05, max_value=0.95), st.integers(min_value=0, max_value=2**31))
def test_masked_positions_only_reach_the_output_layer(rows, rate, seed) -> None:
    model = RecordingMLM()
    objective = MaskedLM(rate)
    tokens, mask = _batch(rows)
    inputs = objective.prepare(tokens, mask, generator=torch.Generator().manual_seed(seed))
    masked = inputs["masked"]
    loss, nll, count = LossModule(model, objective)(**inputs)
    # every masked token became <mask>, nothing else changed
    assert torch.equal(model.inputs, tokens.masked_fill(masked, MASK))
    assert not (masked & ((tokens == UNK) | ~mask)).any()
    # output logits were computed for exactly the masked positions' hidden states, in order
    assert model.logit_rows.shape[0] == int(masked.sum()) == int(count)
    assert torch.equal(model.logit_rows, model.hidden[masked].detach())
    if count:
        expected = F.cross_entropy(model.hidden[masked] @ model.embed.weight.t(), tokens[masked], reduction="sum")
        assert torch.allclose(nll, expected, rtol=1e-5)
        assert torch.allclose(loss, expected / count, rtol=1e-5)
    else:
        assert float(loss.detach()) == 0.0 and loss.requires_grad  # still connected to the graph (DDP needs every grad)


def test_regularizer_is_added_to_the_loss_but_not_to_the_nll() -> None:
    model = RecordingMLM()
    model.penalty = torch.tensor(0.75)
    objective = MaskedLM(0.5)
    tokens, mask = _batch([[3, 4, 5, 6, 7, 8, 9, 10]])
    inputs = objective.prepare(tokens, mask, generator=torch.Generator().manual_seed(3))
    loss, nll, count = LossModule(model, objective)(**inputs)
    assert count > 0
    assert torch.allclose(loss, nll / count + 0.75)


def test_fixed_dev_masks_are_reproducible_and_independent_of_batching() -> None:
    rows = [[3 + (i * j) % 11 for j in range(2 + i % 9)] + [UNK] for i in range(50)]
    first = fixed_masks(rows, 0.3, seed=1234)
    again = fixed_masks(rows, 0.3, seed=1234)
    other = fixed_masks(rows, 0.3, seed=99)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert any(not torch.equal(a, b) for a, b in zip(first, other))
    assert not any(m[-1] for m in first), "<unk> masked in dev"
    # the same sentence gets the same mask whichever batch it lands in
    objective = MaskedLM(0.3)
    for order in ([0, 1, 2], [2, 0], [1]):
        tokens, mask = _batch([rows[i] for i in order])
        masked = objective.prepare(tokens, mask, fixed=[first[i] for i in order])["masked"]
        for b, i in enumerate(order):
            assert torch.equal(masked[b, : len(rows[i])], first[i])
            assert not masked[b, len(rows[i]):].any()


def test_training_masks_follow_the_generator_state() -> None:
    objective = MaskedLM(0.3)
    tokens, mask = _batch([[3] * 40, [4] * 25])
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    objective.prepare(tokens, mask, generator=g1)
    state = g1.get_state()
    a = objective.prepare(tokens, mask, generator=g1)["masked"]
    g2.set_state(state)
    b = objective.prepare(tokens, mask, generator=g2)["masked"]
    assert torch.equal(a, b)


class TinyLM(torch.nn.Module):
    """Position t sees only the boundary and the words before t (a running sum of embeddings); the boundary is
    index ``vocab_size``."""

    def __init__(self, vocab_size: int = 12, hidden: int = 4) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab_size + 1, hidden)
        self.out = torch.nn.Linear(hidden, vocab_size + 1)
        self.boundary = vocab_size
        self.seen: int | None = None

    def lm_hidden(self, tokens, mask):
        start = torch.full((tokens.shape[0], 1), self.boundary)
        inputs = torch.cat([start, tokens], dim=1)
        x = self.embed(inputs) * torch.cat([torch.ones_like(mask[:, :1]), mask], dim=1).unsqueeze(-1)
        return torch.cumsum(x, dim=1)  # position t: boundary + words 0..t-1

    def lm_stream(self, tokens, state):
        x = self.embed(tokens)
        carried = state[0] if state is not None else torch.zeros(tokens.shape[0], x.shape[-1])
        hidden = torch.cumsum(x, dim=1) + carried.unsqueeze(1)
        return hidden, [hidden[:, -1]]

    def output_logits(self, hidden):
        self.seen = hidden.shape[0]
        return self.out(hidden)

    def regularizer(self):
        return None


def test_next_word_lm_predicts_every_word_and_the_sentence_end_from_its_prefix() -> None:
    model = TinyLM()
    objective = NextWordLM(boundary_index=12)
    objective.check_model(model)
    tokens, mask = _batch([[3, 4, 5], [6, 7]])
    loss, nll, count = LossModule(model, objective)(**objective.prepare(tokens, mask))
    assert int(count) == 7 and model.seen == 7  # 3 + 2 words, and two sentence ends
    hidden = model.lm_hidden(tokens, mask)
    targets = torch.tensor([3, 4, 5, 12, 6, 7, 12])
    positions = torch.tensor([[True, True, True, True], [True, True, True, False]])
    expected = F.cross_entropy(model.out(hidden[positions]), targets, reduction="sum")
    assert torch.allclose(nll, expected) and torch.allclose(loss, expected / 7)
    # changing a later word does not change the prediction of an earlier one
    changed = tokens.clone()
    changed[0, 2] = 9
    assert torch.allclose(model.lm_hidden(changed, mask)[0, :3], hidden[0, :3], atol=1e-6)
    loss.backward()
    assert model.embed.weight.grad[12].abs().sum() > 0  # the boundary's embedding is trained


def test_token_stream_lays_sentences_out_as_continuous_text() -> None:
    rows = [[3, 4], [5, 6, 7], [8], [9, 10]]
    stream = TokenStream(rows, 12, n_streams=2, bptt=2)
    # 3 4 B 5 6 7 B 8 B 9 10 B: 12 tokens, 2 streams of 6
    assert stream.data.tolist() == [[3, 4, 12, 5, 6, 7], [12, 8, 12, 9, 10, 12]]
    assert stream.n_chunks == 3  # 5 predictions per stream, 2 at a time
    first, last = stream.chunk(0), stream.chunk(2)
    assert first["tokens"].tolist() == [[3, 4], [12, 8]] and first["targets"].tolist() == [[4, 12], [8, 12]]
    assert last["tokens"].tolist() == [[6], [10]] and last["targets"].tolist() == [[7], [12]]
    # two ranks read disjoint halves of the text
    halves = [TokenStream(rows, 12, n_streams=1, bptt=2, rank=r, world_size=2).data.tolist() for r in (0, 1)]
    assert halves == [[[3, 4, 12, 5, 6, 7]], [[12, 8, 12, 9, 10, 12]]]
    with pytest.raises(DepinduceError, match="too few"):
        TokenStream(rows, 12, n_streams=7, bptt=2)


def test_continuous_lm_carries_state_and_equals_one_long_read() -> None:
    model = TinyLM()
    objective = StreamLM(boundary_index=12, bptt=2)
    objective.check_model(model)
    module = LossModule(model, objective)
    stream = TokenStream([[3, 4], [5, 6, 7], [8], [9, 10]], 12, n_streams=2, bptt=2)
    objective.reset("train")
    total = sum(float(module(**stream.chunk(k))[1]) for k in range(stream.n_chunks))
    objective.reset("train")
    whole = {"tokens": stream.data[:, :-1], "targets": stream.data[:, 1:]}
    _, nll, count = module(**whole)
    assert int(count) == 10 and abs(total - float(nll)) < 1e-4
    # the state is per name and survives a checkpoint round trip
    objective.reset("train")
    module(**stream.chunk(0))
    saved = objective.state_dict()
    assert list(saved) == ["train"] and saved["train"][0].shape == (2, 4)
    fresh = StreamLM(boundary_index=12, bptt=2)
    fresh.load_state_dict(saved, torch.device("cpu"))
    assert torch.equal(fresh.states["train"][0], objective.states["train"][0])


class TinyParser(torch.nn.Module):
    """Arc scores from a bilinear map; two 'refinement' iterations, labels scored at the given heads."""

    def __init__(self, vocab_size: int = 12, n_labels: int = 3, hidden: int = 5) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab_size, hidden)
        self.root = torch.nn.Parameter(torch.randn(hidden))
        self.label = torch.nn.Linear(2 * hidden, n_labels)

    def arc_label_passes(self, tokens, mask, heads, *, upos, init_heads=None, init_labels=None):
        self.seen_upos = upos
        x = self.embed(tokens)
        with_root = torch.cat([self.root.expand(x.shape[0], 1, -1), x], dim=1)  # (B, T+1, H)
        arc = x @ with_root.transpose(1, 2)  # (B, T, T+1)
        head_vectors = torch.gather(with_root, 1, heads.unsqueeze(-1).expand(-1, -1, x.shape[-1]))
        label = self.label(torch.cat([x, head_vectors], dim=-1))
        yield arc, label, None
        yield arc[1:] * 0.5, label[1:], torch.arange(1, x.shape[0])  # the first sentence has stopped

    def regularizer(self):
        return None


def test_supervised_objective_scores_heads_and_labels_over_iterations() -> None:
    model = TinyParser()
    objective = HeadsAndLabels()
    objective.check_model(model)
    tokens, mask = _batch([[3, 4, 5], [6, 7]])
    heads = torch.tensor([[2, 0, 2], [0, 1, 0]])
    labels = torch.tensor([[1, 0, 2], [0, 1, 0]])
    with pytest.raises(DepinduceError):
        objective.prepare(tokens, mask)
    with pytest.raises(DepinduceError, match="upos"):
        objective.prepare(tokens, mask, heads=heads, labels=labels)
    upos = torch.ones_like(tokens)
    inputs = objective.prepare(tokens, mask, heads=heads, labels=labels, upos=upos)
    assert set(inputs) == {"tokens", "mask", "heads", "labels", "upos"}
    loss, nll, count = LossModule(model, objective)(**inputs)
    assert model.seen_upos is upos
    assert int(count) == 5 + 2  # 5 tokens at pass 0, the second sentence's 2 at pass 1
    first, second = list(model.arc_label_passes(tokens, mask, heads, upos=upos))
    expected = (F.cross_entropy(first[0][mask], heads[mask], reduction="sum")
                + F.cross_entropy(first[1][mask], labels[mask], reduction="sum")
                + F.cross_entropy(second[0][mask[1:]], heads[1:][mask[1:]], reduction="sum")
                + F.cross_entropy(second[1][mask[1:]], labels[1:][mask[1:]], reduction="sum"))
    assert torch.allclose(nll, expected) and torch.allclose(loss, expected / 7)
    # one update per pass (the authors' trainer): each pass's own mean, the stopped sentence absent from pass 1
    model.updates_per_pass, model.max_passes = True, 2
    assert objective.stepwise(model) and objective.max_updates(model) == 2
    per_pass = list(objective.updates(model, **inputs))
    assert [int(o.count) for o in per_pass] == [5, 2]
    assert torch.allclose(per_pass[1].loss, (F.cross_entropy(second[0][mask[1:]], heads[1:][mask[1:]], reduction="sum")
                                             + F.cross_entropy(second[1][mask[1:]], labels[1:][mask[1:]],
                                                               reduction="sum")) / 2)
    assert not objective.reports_perplexity and objective.needs_gold


def test_objective_hooks_are_checked_with_a_clear_error() -> None:
    with pytest.raises(DepinduceError, match=r"lacks lm_hidden\(\)"):
        objective_for("lm", mask_rate=0.3, vocab_size=12).check_model(RecordingMLM())
    with pytest.raises(DepinduceError, match="not trainable"):
        objective_for("none", mask_rate=0.3, vocab_size=12)
    assert isinstance(objective_for("mlm", mask_rate=0.3, vocab_size=12), MaskedLM)
    assert isinstance(objective_for("lm", mask_rate=0.3, vocab_size=12, lm_mode="continuous"), StreamLM)
    with pytest.raises(DepinduceError, match="needs a next-word language model"):
        objective_for("mlm", mask_rate=0.3, vocab_size=12, lm_mode="continuous")


def test_a_float64_model_gets_a_float64_loss() -> None:
    """The losses are computed in the model's precision (float16/bfloat16 scores are widened to float32 only)."""
    torch.manual_seed(0)
    tokens, mask = _batch([[3, 4, 5, 6], [7, 8]])
    mlm = RecordingMLM().double()
    masked = torch.tensor([[True, False, True, False], [False, True, False, False]])
    out = MaskedLM(0.3).compute(mlm, tokens=tokens, mask=mask, masked=masked)
    logits = mlm.hidden[masked] @ mlm.embed.weight.t()  # what the model computed from the masked input
    expected = F.cross_entropy(logits, tokens[masked], reduction="sum")
    assert out.loss.dtype == torch.float64 and out.nll_sum.dtype == torch.float64
    assert out.nll_sum.item() == expected.item()  # bit for bit: no float32 rounding on the way
    parser = TinyParser().double()
    heads = torch.tensor([[2, 0, 2, 3], [0, 1, 0, 0]])
    gold = dict(heads=heads, labels=torch.zeros_like(heads), upos=torch.ones_like(heads))
    assert HeadsAndLabels().compute(parser, tokens=tokens, mask=mask, **gold).loss.dtype == torch.float64
    half = MaskedLM(0.3).compute(RecordingMLM().to(torch.bfloat16), tokens=tokens, mask=mask, masked=masked)
    assert half.nll_sum.dtype == torch.float32


def test_loss_chunks_reach_the_masked_lm_and_only_it() -> None:
    objective = objective_for("mlm", mask_rate=0.3, vocab_size=12, loss_chunks=4)
    assert isinstance(objective, MaskedLM) and objective.chunks == 4
    with pytest.raises(DepinduceError, match="loss_chunks applies to masked-LM training"):
        objective_for("supervised", mask_rate=0.3, vocab_size=12, loss_chunks=4)
