"""``train.precision: bf16`` (training/precision.py): bfloat16 autocast for StructFormer's and UDGN's training
steps.  Float32 stays the default and the authors' function (the backends' equivalence tests pin that); here:
under autocast the fused CPU kernels step aside, the step computes nearly the float32 loss and gradients, the
weights and gradients stay float32, the structure stays float32, and other backends refuse the setting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from depinduce.data.vocab import Vocab
from depinduce.errors import RecipeError
from depinduce.models.layers.kernels import lowered, norm_linear, position_linear
from depinduce.models.layers.dropout import residual_dropout_
from depinduce.training.engine import TrainOptions, train, trainable_class
from depinduce.training.objectives import LossModule, objective_for
from depinduce.training.precision import autocast, check_precision, cpu_has_bf16
from training_support import make_data, one_thread, tiny_plugin  # noqa: F401 (fixtures)

SMALL = {
    "structformer": {"hidden_size": 64, "n_layers": 2, "n_heads": 4, "ff_size": 128, "dropout": 0.1, "dropatt": 0.1},
    "udgn": {"hidden_size": 64, "n_layers": 2, "n_heads": 4, "head_size": 16, "parser_layers": 2,
             "parser_hidden_size": 64, "dropout": 0.1, "dropatt": 0.1},
}


def _quiet(_: str) -> None:
    pass


def test_cpu_flags_decide_whether_bf16_is_native(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16\n")
    assert cpu_has_bf16(info) is True
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 fma\n")
    assert cpu_has_bf16(info) is False
    assert cpu_has_bf16(tmp_path / "missing") is None


def test_other_backends_refuse_bf16_in_one_line() -> None:
    with pytest.raises(RecipeError, match="model 'prpn' trains in float32 only"):
        check_precision("bf16", "prpn", False, torch.device("cpu"), _quiet)
    check_precision("fp32", "prpn", False, torch.device("cpu"), _quiet)  # the default is never refused


def test_the_shared_layers_use_torch_ops_under_autocast() -> None:
    torch.manual_seed(0)
    x = torch.randn(3, 5, 8, requires_grad=True)
    linear, norm = torch.nn.Linear(8, 6), torch.nn.LayerNorm(8)
    assert not lowered(x)
    with autocast("bf16", x.device):
        assert lowered(x)
        y = position_linear(x, linear.weight, linear.bias)
        z = norm_linear(x, norm, linear)
        out = residual_dropout_(y, torch.zeros(3, 5, 6), 0.0, True)
    assert y.dtype == z.dtype == torch.bfloat16
    assert out.dtype == torch.float32  # the residual stream stays float32
    torch.testing.assert_close(y.float(), torch.nn.functional.linear(x, linear.weight, linear.bias),
                               atol=0.05, rtol=0.02)
    (y.float().sum() + z.float().sum()).backward()
    assert x.grad is not None and x.grad.dtype == torch.float32 and linear.weight.grad.dtype == torch.float32


@pytest.mark.parametrize("name", ["structformer", "udgn"])
def test_a_bf16_step_is_close_to_the_float32_step(name: str) -> None:
    vocab = Vocab([f"w{i}" for i in range(200)])
    model_class = trainable_class(name)
    assert model_class.mixed_precision
    torch.manual_seed(0)
    # no dropout: the fused float32 kernels and torch's ops draw their masks differently
    model = model_class.from_config({**SMALL[name], "dropout": 0.0, "dropatt": 0.0}, vocab).train()
    objective = objective_for(model_class.capabilities.objective, mask_rate=0.3, vocab_size=len(vocab))
    loss_module = LossModule(model, objective)
    tokens = torch.randint(3, len(vocab), (6, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(tokens, dtype=torch.bool)
    mask[3:, 6:] = False
    inputs = objective.prepare(tokens, mask, generator=torch.Generator().manual_seed(2))

    def step(precision: str) -> tuple[float, torch.Tensor]:
        model.zero_grad(set_to_none=True)
        with autocast(precision, torch.device("cpu")):
            loss = loss_module(**inputs)[0]
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        assert all(g.dtype == torch.float32 for g in grads)
        return float(loss.detach()), torch.cat([g.flatten() for g in grads])

    loss32, grad32 = step("fp32")
    loss16, grad16 = step("bf16")
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert abs(loss16 - loss32) < 0.02 * abs(loss32)
    assert loss16 != loss32  # it did compute in bfloat16
    cosine = float(torch.nn.functional.cosine_similarity(grad16, grad32, dim=0))
    assert cosine > 0.99
    with autocast("bf16", torch.device("cpu")):
        scores = model.score_tensors(tokens, mask)
    assert all(s.heads.dtype == torch.float32 for s in scores)


def test_bf16_training_runs_and_is_recorded(tmp_path: Path, one_thread) -> None:
    data = make_data(tmp_path / "data", n_train=60, n_dev=8)
    run = tmp_path / "run"
    config = {key: value for key, value in SMALL["udgn"].items()}
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(json.dumps({"model": "udgn", "model_config": config,
                                  "train": {"epochs": 1, "batch_tokens": 200, "precision": "bf16", "lr": 1e-3}}))
    train(TrainOptions(data_dir=data, run_dir=run, recipe=recipe, quiet=True), log=_quiet)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert records and all(r["dev_loss"] == r["dev_loss"] for r in records)  # finite dev figures
    assert "precision: bf16" in (run / "config.yaml").read_text()


def test_bf16_on_a_float32_only_backend_stops_training(tmp_path: Path, tiny_plugin: Path) -> None:
    data = make_data(tmp_path / "data", n_train=30, n_dev=5, gold_dev=False)
    with pytest.raises(RecipeError, match="trains in float32 only"):
        train(TrainOptions(data_dir=data, run_dir=tmp_path / "run", model="tiny-mlm", quiet=True,
                           overrides=("precision=bf16",)), log=_quiet)
