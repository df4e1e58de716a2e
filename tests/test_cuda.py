"""The backends on a CUDA device: the same training loss and gradients as on the CPU, and the whole ``train`` →
``parse`` → ``eval`` path run there.

Skipped where torch sees no CUDA device (CI's machines have none; README's Benchmarks section says where these
ran).  The CPU paths of the layers (oneDNN routing, dropout masks kept as bits, in-place residual sums) step aside
on other devices, so these tests are what shows that the plain-torch paths the GPU takes compute the same
function; each device takes the engine's own step (on CUDA the loss that gathers the predicted positions by an
index made on the CPU).  TF32 is turned off for the comparison: with it, cuBLAS and cuDNN round float32 operands to 10-bit
mantissas, which is a numerics choice of the user's, not a difference between the implementations.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from depinduce.data.vocab import Vocab
from depinduce.training.compiled_step import build_step
from depinduce.training.config import TrainConfig
from depinduce.training.engine import trainable_class
from depinduce.training.objectives import LossModule, objective_for
from training_support import make_data, make_ud_data

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="no CUDA device here (these run on a GPU machine: README, Benchmarks)")]

# Small networks, dropout off (the two devices draw different masks); every other switch at its default.
SMALL: dict[str, dict[str, object]] = {
    "structformer": {"hidden_size": 64, "n_layers": 2, "n_heads": 4, "ff_size": 128, "dropout": 0.0},
    "udgn": {"hidden_size": 64, "n_layers": 2, "n_heads": 4, "head_size": 16, "parser_layers": 2,
             "parser_hidden_size": 64, "dropout": 0.0, "dropatt": 0.0},
    "prpn": {"emb_size": 32, "hidden_size": 64, "n_layers": 2, "n_slots": 5, "lookback": 3, "dropout": 0.0,
             "idropout": 0.0, "rdropout": 0.0},
    "probformer": {"d": 64, "n_channels": 4, "n_iter": 3, "rank": 8, "dropout": 0.0},
    "cpcfg": {"nt": 6, "t": 8, "state_dim": 32, "compound": False, "word_dim": 32, "lstm_dim": 32},
}


@pytest.fixture(autouse=True)
def exact_float32() -> Iterator[None]:
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def batch(vocab_size: int, lengths: list[int], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths)
    mask = torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]
    tokens = torch.randint(4, vocab_size, (len(lengths), width), generator=generator).masked_fill(~mask, 0)
    return tokens, mask


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


@pytest.mark.parametrize("name", sorted(SMALL))
def test_training_loss_and_gradients_on_cuda_match_the_cpu(name: str) -> None:
    vocab = Vocab([f"w{i}" for i in range(60)])
    model_class = trainable_class(name)
    torch.manual_seed(0)
    cpu_model = model_class.from_config(SMALL[name], vocab, where="test")
    cuda_model = copy.deepcopy(cpu_model).cuda()
    objective = objective_for(model_class.capabilities.objective, mask_rate=0.3, vocab_size=len(vocab))
    tokens, mask = batch(len(vocab), [7, 12, 3, 12, 9], seed=1)
    inputs = objective.prepare(tokens, mask, generator=torch.Generator().manual_seed(2))
    results = []
    for model, device in ((cpu_model, "cpu"), (cuda_model, "cuda")):
        model.train()
        # the engine's step on each device (compiled_step.build_step): on CUDA the loss gathers the predicted
        # positions by an index made on the CPU, on the exact batch
        step = build_step(model, objective, LossModule(model, objective), TrainConfig(), pad_index=vocab.pad_index,
                          device=torch.device(device))
        prepared = inputs if step.pad is None else step.pad(inputs)
        loss, nll, count = step.module(**{k: v.to(device) for k, v in prepared.items()})
        loss.backward()
        results.append((loss, nll, count, {n: p.grad for n, p in model.named_parameters() if p.grad is not None}))
    (cpu_loss, cpu_nll, cpu_count, cpu_grads), (cuda_loss, cuda_nll, cuda_count, cuda_grads) = results
    assert cuda_loss.device.type == "cuda"
    assert int(cpu_count) == int(cuda_count)
    assert relative_error(cuda_loss, cpu_loss) < 1e-5
    assert relative_error(cuda_nll, cpu_nll) < 1e-5
    assert cpu_grads.keys() == cuda_grads.keys() and cpu_grads
    # Per parameter, relative to its own gradient, or to the whole gradient where a parameter's is zero up to
    # rounding (biases the loss is invariant to: PRPN's gate window, StructFormer's distance offset).
    scale = torch.stack([g.double().norm() for g in cpu_grads.values()]).norm()
    for name_, grad in cpu_grads.items():
        error = (cuda_grads[name_].double().cpu() - grad.double()).norm()
        assert error <= 1e-3 * grad.double().norm() + 1e-6 * scale, name_


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "depinduce", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


# RNGTr trains on gold trees (HeadsAndLabels), so it is in the whole-path test only.
RNGTR_SMALL = {"hidden_size": 32, "n_layers": 1, "n_heads": 2, "ff_size": 64, "arc_mlp_size": 32, "label_mlp_size": 16}


def small_settings(name: str) -> list[str]:
    config = RNGTR_SMALL if name == "rngtr" else SMALL[name]
    return [item for key, value in config.items() for item in ("--set", f"{key}={value}")]


@pytest.mark.parametrize("name", ["structformer", "udgn", "prpn", "probformer", "cpcfg", "rngtr"])
def test_train_resume_parse_and_eval_on_cuda(name: str, tmp_path: Path) -> None:
    """A CPU recipe's run on the GPU: trained to a token budget, resumed past it, then parsed there and
    scored — the path a user with a GPU takes (``--device cuda``)."""
    data = (make_ud_data if name == "rngtr" else make_data)(tmp_path / "data", n_train=120, n_dev=20)
    settings = small_settings(name)
    out = tmp_path / "run"
    first = run("train", "--model", name, "--device", "cuda", "--data", str(data), "--out", str(out), "--quiet",
                "--max-tokens", "2k", *settings, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    second = run("train", "--device", "cuda", "--out", str(out), "--quiet", "--resume", "--max-tokens", "4k",
                 cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-2000:]
    constituency = name in ("prpn", "cpcfg")  # they write trees, scored against the dev trees
    fmt, gold = ("brackets", data / "dev.trees") if constituency else ("conllu", data / "dev.conllu")
    outputs = []
    for device in ("cuda", "cpu"):
        parsed = run("parse", "--model", str(out), "--device", device, "--format", fmt, "--input-format", "conllu",
                     str(data / "dev.conllu"), cwd=tmp_path)
        assert parsed.returncode == 0, parsed.stderr[-2000:]
        outputs.append(parsed.stdout)
    count = (lambda text: len(text.splitlines())) if constituency else (lambda text: text.count("\n\n"))
    assert count(outputs[0]) == count(outputs[1]) == 20
    (tmp_path / "pred").write_text(outputs[0])
    scored = run("eval", "--gold", str(gold), "--pred", str(tmp_path / "pred"), cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr[-2000:]
