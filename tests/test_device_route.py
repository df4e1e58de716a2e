"""The route a CUDA device takes, run on the CPU (``models/layers/kernels.device_route``): torch's own ops where
the CPU has its kernels and custom autograd Functions.  It is how ``scripts/count_ops.py`` counts a GPU step's
ops without a GPU, and how these tests check, without one, that the GPU's route computes what the CPU's does."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from depinduce.data.vocab import Vocab
from depinduce.models.layers import kernels
from depinduce.models.layers.kernels import device_route, on_cpu_route, plain_ops
from depinduce.models.structformer import StructFormer, StructFormerConfig
from depinduce.models.udgn import UDGN, UDGNConfig
from depinduce.training.objectives import LossModule, MaskedLM

VOCAB = Vocab([f"w{i}" for i in range(60)])
BUILD = {
    "structformer": lambda: StructFormer(StructFormerConfig(hidden_size=32, n_layers=2, n_heads=4, ff_size=64,
                                                            dropout=0.0, dropatt=0.0), VOCAB),
    "udgn": lambda: UDGN(UDGNConfig(hidden_size=32, n_layers=2, n_heads=4, head_size=8, parser_layers=2,
                                    parser_hidden_size=16, dropout=0.0, dropatt=0.0), VOCAB),
}


def test_the_switch_covers_its_block_only() -> None:
    x = torch.zeros(2, 3, 4)
    assert on_cpu_route(x) and not plain_ops(x)
    with device_route():
        assert not on_cpu_route(x) and plain_ops(x)
        with device_route():
            pass
        assert not on_cpu_route(x)  # a nested block leaves the outer one in force
    assert on_cpu_route(x) and not plain_ops(x)


class _Dispatched(TorchDispatchMode):
    """The aten ops run inside the block."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[object] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize(("width", "padding"), [(9, 4), (2, 1), (3, 0)])
def test_the_device_routes_convolution_is_conv1d(width: int, padding: int) -> None:
    """Off the CPU's route a sequence convolution is one product over unfolded windows (cuDNN's exact-float32
    algorithms took 37 GB and 2.4× the time on an H200): the same values and gradients as ``conv1d``."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 7, 5, dtype=torch.float64, generator=generator, requires_grad=True)
    weight = torch.randn(6, 5, width, dtype=torch.float64, generator=generator, requires_grad=True)
    bias = torch.randn(6, dtype=torch.float64, generator=generator, requires_grad=True)
    want = torch.nn.functional.conv1d(x.transpose(1, 2), weight, bias, padding=padding).transpose(1, 2)
    with device_route(), _Dispatched() as dispatched:
        got = kernels.sequence_conv(x, weight, bias, padding)
    assert torch.ops.aten.convolution.default not in dispatched.ops  # a product, never a cuDNN convolution
    assert got.shape == want.shape == (3, 7 + 2 * padding - width + 1, 6)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    upstream = torch.randn(want.shape, dtype=torch.float64, generator=generator)
    for a, b in zip(torch.autograd.grad(got, (x, weight, bias), upstream),
                    torch.autograd.grad(want, (x, weight, bias), upstream)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def _loss_and_gradients(model: torch.nn.Module) -> tuple[torch.Tensor, list[torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    lengths = torch.tensor([12, 9, 7, 12, 3])
    mask = torch.arange(12)[None, :] < lengths[:, None]
    tokens = torch.randint(4, len(VOCAB), (5, 12), generator=generator).masked_fill(~mask, 0)
    inputs = MaskedLM(0.3).prepare(tokens, mask, generator=generator)
    model.train()
    model.zero_grad(set_to_none=True)
    loss = LossModule(model, MaskedLM(0.3))(**inputs)[0]
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("name", sorted(BUILD))
@pytest.mark.parametrize("onednn", [True, False])
def test_the_device_route_computes_the_cpu_routes_loss_and_gradients(name: str, onednn: bool,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Without dropout (the routes draw their masks differently): the same loss and gradients to round-off,
    with the CPU's linear maps on either of their kernels (oneDNN or MKL)."""
    monkeypatch.setattr(kernels, "onednn_linear_pays", lambda: onednn)
    torch.manual_seed(0)
    model = BUILD[name]()
    cpu_loss, cpu_grads = _loss_and_gradients(model)
    with device_route():
        loss, grads = _loss_and_gradients(model)
    torch.testing.assert_close(loss, cpu_loss, rtol=1e-6, atol=1e-6)
    for got, want in zip(grads, cpu_grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


def test_udgns_cached_pair_tables_serve_training_after_inference_mode() -> None:
    """The per-width tables are cached; one first built while parsing (inference mode) still serves a training
    step on either route."""
    from depinduce.models.udgn.dgn import pair_directions, pair_sides

    pair_directions.cache_clear()
    pair_sides.cache_clear()
    torch.manual_seed(0)
    model = BUILD["udgn"]()
    tokens = torch.randint(4, len(VOCAB), (2, 12))  # the width _loss_and_gradients trains at
    mask = torch.ones(2, 12, dtype=torch.bool)
    with torch.inference_mode(), device_route():
        model.eval()
        model.encode(tokens, mask)
    for route in (device_route, torch.enable_grad):
        with route():
            loss, grads = _loss_and_gradients(model)
        assert torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("to_ladder", [True, False], ids=["static shapes", "exact batch"])
@pytest.mark.parametrize(("name", "lstm_route", "reads"), [("structformer", "", 1), ("udgn", "", 0),
                                                           ("udgn", "packed", 2)])
def test_a_gpu_step_reads_the_host_only_where_documented(name: str, lstm_route: str, reads: int, to_ladder: bool,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The forward pass, loss and backward on the route a CUDA device takes, the masked rows gathered by an index
    made on the CPU, the batch padded to a static shape (a compiled step) or exact (an eager one): StructFormer
    reads one number (whether a sentence needs its exact float64 fallback; on the device under ``compile``),
    UDGN's packed LSTM two (the lengths it packs by), its LSTM one direction at a time (the default) none.
    Reads: ``_local_scalar_dense`` and ``nonzero`` (boolean indexing)."""
    from torch.profiler import ProfilerActivity, profile

    from depinduce.models.neural import pad_batch
    from depinduce.training.shapes import StaticLoss, pad_inputs

    monkeypatch.setenv("DEPINDUCE_LSTM_ROUTE", lstm_route)
    torch.manual_seed(0)
    model = BUILD[name]().train()
    rows = [[4 + (i * 7 + j) % 50 for j in range(5 + i)] for i in range(6)]
    objective = MaskedLM(0.3)
    inputs = pad_inputs("mlm", objective.prepare(*pad_batch(rows, VOCAB.pad_index),
                                                 generator=torch.Generator().manual_seed(0)), VOCAB.pad_index,
                        to_ladder=to_ladder)
    assert inputs["tokens"].shape == ((6, 12) if to_ladder else (6, 10))
    step = StaticLoss(model, "mlm", mask_index=VOCAB.mask_index, boundary_index=-1)
    with device_route():
        step(**inputs)[0].backward()  # warm-up
        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            step(**inputs)[0].backward()
    found = [e.name for e in profiler.events() if e.name in ("aten::_local_scalar_dense", "aten::nonzero")]
    assert len(found) == reads, found
