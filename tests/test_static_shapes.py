"""Static shapes (training/shapes.py) leave every loss and gradient as the exact batch gives them; the batch feed
(training/prefetch.py) prepares the same batches ahead and rewinds the mask generator, so a resume stays exact."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from depinduce.data.vocab import Vocab
from depinduce.errors import RecipeError
from depinduce.models.neural import pad_batch
from depinduce.training.config import TrainConfig
from depinduce.training.engine import TrainOptions, train, trainable_class
from depinduce.training.objectives import LossModule, objective_for
from depinduce.training.prefetch import BatchFeed
from depinduce.training.shapes import StaticLoss, has_batch_statistics, ladder, pad_inputs, static_shape
from depinduce.training.compiled_step import build_step, indexed_loss_on, static_shapes_on
from training_support import make_data, one_thread, tiny_plugin  # noqa: F401 (fixtures)

TINY = {
    "structformer": {"hidden_size": 16, "n_layers": 2, "n_heads": 4, "ff_size": 32, "dropout": 0.0, "dropatt": 0.0},
    "udgn": {"hidden_size": 16, "n_layers": 2, "n_heads": 4, "head_size": 6, "parser_layers": 2,
             "parser_hidden_size": 16, "dropout": 0.0, "dropatt": 0.0},
    "probformer": {"d": 10, "n_channels": 2, "n_iter": 2, "rank": 3, "distance_threshold": 2, "dropout": 0.0},
    "prpn": {"emb_size": 12, "hidden_size": 16, "n_layers": 2, "n_slots": 4, "lookback": 2, "dropout": 0.0,
             "idropout": 0.0},
}
CUDA = torch.device("cuda")  # only its type is read: no GPU needed
ROWS = [[5, 6, 7, 8, 9], [10, 11, 12], [13, 14, 15, 16, 17, 18, 19, 20, 21], [22, 23], [24, 25, 26, 27, 28, 29, 30]]


def test_the_ladder_rounds_up_to_few_sizes() -> None:
    assert [ladder(n) for n in (0, 1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 100)] == \
        [1, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128]
    assert len({static_shape(rows, length) for rows in range(1, 129) for length in range(1, 61)}) == 14 * 12
    assert all(ladder(n) < 1.5 * n + 1 for n in range(1, 5000))  # the padding costs at most half again


def _loss_and_gradients(model: torch.nn.Module, module: torch.nn.Module,
                        inputs: dict[str, torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    loss, nll, count = module(**inputs)
    loss.backward()
    return [loss.detach(), nll, count.float()], [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("name, overrides", [("structformer", {}), ("structformer", {"margin": "batch"}),
                                             ("udgn", {}), ("prpn", {})])
def test_padded_batches_give_the_exact_losses_and_gradients(name: str, overrides: dict, one_thread) -> None:
    vocab = Vocab([f"w{i}" for i in range(40)])
    cls = trainable_class(name)
    torch.manual_seed(0)
    model = cls.from_config({**TINY[name], **overrides}, vocab)
    model.train()
    objective = objective_for(cls.capabilities.objective, mask_rate=0.4, vocab_size=len(vocab))
    tokens, mask = pad_batch(ROWS, vocab.pad_index)
    inputs = objective.prepare(tokens, mask, generator=torch.Generator().manual_seed(1))
    pad_rows = not has_batch_statistics(model)
    static = pad_inputs(objective.name, inputs, vocab.pad_index, pad_rows=pad_rows)
    # the padding is real: 5 × 9 becomes 6 × 12 (PRPN's BatchNorm keeps its 5 rows)
    assert static["tokens"].shape == ((6, 12) if pad_rows else (5, 12)) and pad_rows == (name != "prpn")
    module = StaticLoss(model, objective.name, mask_index=vocab.mask_index, boundary_index=len(vocab))
    exact_numbers, exact_grads = _loss_and_gradients(model, LossModule(model, objective), inputs)
    static_numbers, static_grads = _loss_and_gradients(model, module, static)
    assert exact_numbers[2] > 0
    for exact, padded in zip(exact_numbers + exact_grads, static_numbers + static_grads):
        torch.testing.assert_close(padded, exact, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["structformer", "probformer"])
def test_chunked_batches_padded_run_by_run_give_the_exact_losses_and_gradients(name: str, one_thread) -> None:
    """``loss_chunks`` (the Probabilistic Transformer's trainer): each run of sentences trimmed to its own
    longest one on the CPU and padded on its own; the sum of the runs' mean losses as the objective gives it."""
    vocab = Vocab([f"w{i}" for i in range(40)])
    torch.manual_seed(0)
    model = trainable_class(name).from_config(TINY[name], vocab)
    model.train()
    objective = objective_for("mlm", mask_rate=0.4, vocab_size=len(vocab), loss_chunks=2)
    inputs = objective.prepare(*pad_batch(ROWS, vocab.pad_index), generator=torch.Generator().manual_seed(1))
    static = pad_inputs("mlm", inputs, vocab.pad_index, chunks=2)
    # runs of 3 and 2 sentences, trimmed to 9 and 7 words, padded to 3 × 12 and 2 × 8
    assert static["tokens_0"].shape == (3, 12) and static["tokens_1"].shape == (2, 8) and "tokens_2" not in static
    module = StaticLoss(model, "mlm", mask_index=vocab.mask_index, boundary_index=len(vocab))
    exact_numbers, exact_grads = _loss_and_gradients(model, LossModule(model, objective), inputs)
    static_numbers, static_grads = _loss_and_gradients(model, module, static)
    unchunked = LossModule(model, objective_for("mlm", mask_rate=0.4, vocab_size=len(vocab)))(**inputs)[0]
    assert not torch.allclose(unchunked, exact_numbers[0])  # the chunks' sum is not the batch's mean
    for exact, padded in zip(exact_numbers + exact_grads, static_numbers + static_grads):
        torch.testing.assert_close(padded, exact, rtol=1e-5, atol=1e-6)


def test_added_rows_would_change_batch_statistics() -> None:
    """Why PRPN keeps its rows: with added rows its loss is no longer the exact batch's."""
    vocab = Vocab([f"w{i}" for i in range(40)])
    torch.manual_seed(0)
    model = trainable_class("prpn").from_config(TINY["prpn"], vocab)
    model.train()
    objective = objective_for("lm", mask_rate=0.3, vocab_size=len(vocab))
    inputs = objective.prepare(*pad_batch(ROWS, vocab.pad_index))
    module = StaticLoss(model, "lm", mask_index=vocab.mask_index, boundary_index=len(vocab))
    exact = LossModule(model, objective)(**inputs)[1]
    assert has_batch_statistics(model)
    assert not torch.allclose(module(**pad_inputs("lm", inputs, vocab.pad_index, pad_rows=True))[1], exact,
                              rtol=1e-6, atol=0)


def test_static_shapes_follow_compile_unless_set() -> None:
    mlm = objective_for("mlm", mask_rate=0.3, vocab_size=10)
    assert not static_shapes_on(TrainConfig(), mlm)  # the default: exact batches, on every device
    assert static_shapes_on(TrainConfig(compile="default"), mlm)
    assert static_shapes_on(TrainConfig(static_shapes="on"), mlm)
    assert not static_shapes_on(TrainConfig(compile="default", static_shapes="off"), mlm)
    likelihood = objective_for("likelihood", mask_rate=0.3, vocab_size=10)
    with pytest.raises(RecipeError, match="static_shapes: on does not apply to objective 'likelihood'"):
        static_shapes_on(TrainConfig(static_shapes="on"), likelihood)


def test_off_the_cpu_the_loss_gathers_by_an_index_made_on_the_cpu() -> None:
    """On CUDA the exact loss's boolean selection of the masked rows would make the host wait at every step: the
    step takes the index-gathering loss there, padded only when static shapes are on."""
    mlm = objective_for("mlm", mask_rate=0.3, vocab_size=10)
    assert indexed_loss_on(TrainConfig(), mlm, device=CUDA)
    assert indexed_loss_on(TrainConfig(static_shapes="off"), mlm, device=CUDA)
    assert not indexed_loss_on(TrainConfig(), mlm, device=torch.device("cpu"))
    assert not indexed_loss_on(TrainConfig(), mlm)
    assert indexed_loss_on(TrainConfig(compile="default"), mlm, device=torch.device("cpu"))
    assert not indexed_loss_on(TrainConfig(), objective_for("supervised", mask_rate=0.3, vocab_size=10),
                               device=CUDA)  # where it does not apply, the exact loss


@pytest.mark.parametrize("name", ["structformer", "prpn"])
def test_an_eager_gpu_step_runs_the_exact_batch(name: str, one_thread) -> None:
    """``static_shapes: auto`` without ``compile`` on CUDA: no padding (on the ladder an epoch of Brown's
    4,096-token batches costs 1.39× the compute), the exact batch and an index of exactly its predicted
    positions, the exact loss and gradients; compiled, the ladder's shapes.  (That neither form reads the host:
    ``tests/test_device_route.py``.)"""
    vocab = Vocab([f"w{i}" for i in range(40)])
    cls = trainable_class(name)
    torch.manual_seed(0)
    model = cls.from_config(TINY[name], vocab).double()
    model.train()
    objective = objective_for(cls.capabilities.objective, mask_rate=0.4, vocab_size=len(vocab))
    inputs = objective.prepare(*pad_batch(ROWS, vocab.pad_index), generator=torch.Generator().manual_seed(1))
    loss_module = LossModule(model, objective)
    eager = build_step(model, objective, loss_module, TrainConfig(), pad_index=vocab.pad_index, device=CUDA)
    assert isinstance(eager.module, StaticLoss) and not eager.static
    exact = eager.pad(inputs)
    assert exact["tokens"].shape == inputs["tokens"].shape == (5, 9)
    if name == "structformer":
        assert exact["positions"].shape == (int(inputs["masked"].sum()),)  # not rounded up: nothing ignored
        assert (exact["targets"] != -100).all()
    compiled_step = build_step(model, objective, loss_module, TrainConfig(compile="cudagraphs"),
                               pad_index=vocab.pad_index, device=CUDA)
    padded_shape = (5, 12) if name == "prpn" else (6, 12)  # PRPN's BatchNorm keeps its rows
    assert compiled_step.static and compiled_step.pad(inputs)["tokens"].shape == padded_shape
    assert build_step(model, objective, loss_module, TrainConfig(), pad_index=vocab.pad_index,
                      device=torch.device("cpu")).module is loss_module
    exact_numbers, exact_grads = _loss_and_gradients(model, loss_module, inputs)
    indexed_numbers, indexed_grads = _loss_and_gradients(model, eager.module, exact)
    for want, got in zip(exact_numbers + exact_grads, indexed_numbers + indexed_grads):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def _prepare_with(generator: torch.Generator):
    corpus = [[4 + (i * 7 + j) % 30 for j in range(2 + i % 5)] for i in range(40)]
    objective = objective_for("mlm", mask_rate=0.3, vocab_size=40)

    def prepare(rows):
        tokens, mask = pad_batch([corpus[i] for i in rows], 0)
        return objective.prepare(tokens, mask, generator=generator), int(mask.sum())

    return prepare


def test_the_feed_prepares_the_same_batches_and_rewinds_the_generator() -> None:
    batches = [list(range(k, k + 4)) for k in range(0, 40, 4)]
    inline_gen = torch.Generator().manual_seed(5)
    inline = [_prepare_with(inline_gen)(rows) for rows in batches]
    generator = torch.Generator().manual_seed(5)
    feed = BatchFeed(_prepare_with(generator), generator, torch.device("cpu"), enabled=True)
    feed.start(batches)
    for k in range(3):
        inputs, tokens = feed.take(batches[k])
        assert tokens == inline[k][1] and all(torch.equal(inputs[key], inline[k][0][key]) for key in inputs)
    feed.pause()  # the thread ran ahead; the generator is back after batch 3, as a checkpoint must record it
    replay = torch.Generator().manual_seed(5)
    for rows in batches[:3]:
        _prepare_with(replay)(rows)
    assert torch.equal(generator.get_state(), replay.get_state())
    for k in range(3, len(batches)):  # the feed starts again where it stopped
        inputs, _ = feed.take(batches[k])
        assert all(torch.equal(inputs[key], inline[k][0][key]) for key in inputs)


def test_resume_with_prefetch_and_static_shapes_matches_an_uninterrupted_run(tmp_path: Path, tiny_plugin: Path,
                                                                             one_thread) -> None:
    data = make_data(tmp_path / "data", n_train=120, n_dev=10, gold_dev=False)
    sets = ("epochs=2", "batch_tokens=120", "schedule=constant", "dev_parse=false", "prefetch=on",
            "static_shapes=on", "dropout=0.0")
    reference = tmp_path / "reference"
    whole = train(TrainOptions(data_dir=data, run_dir=reference, model="tiny-mlm", overrides=sets, seed=3,
                               quiet=True, max_tokens=1400), log=lambda _: None)
    run = tmp_path / "run"
    first = train(TrainOptions(data_dir=data, run_dir=run, model="tiny-mlm", overrides=sets, seed=3, quiet=True,
                               max_tokens=500), log=lambda _: None)
    assert first.reason == "max_tokens" and 0 < first.step < whole.step
    train(TrainOptions(run_dir=run, resume=True, quiet=True, max_tokens=1400), log=lambda _: None)
    ours = torch.load(run / "last.pt", weights_only=True)
    theirs = torch.load(reference / "last.pt", weights_only=True)
    assert ours["progress"]["step"] == theirs["progress"]["step"] == whole.step
    for key, value in theirs["model"].items():
        assert torch.equal(ours["model"][key], value), key
