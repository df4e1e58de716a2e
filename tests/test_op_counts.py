"""Ops one training step's forward, loss and backward dispatch for small StructFormer and UDGN models (issue 45).

On a GPU a step of these models is bound by the host issuing kernels, so the number of ops is what its speed
follows; per-head or per-layer Python loops multiply it.  Counted as ``scripts/count_ops.py`` counts: the
top-level ``aten::`` events of ``torch.profiler`` (an op that another aten op dispatched is not counted again),
over the masked-LM loss of a fixed 4 × 12 batch and its backward, in training mode with dropout, one thread,
the linear maps on their oneDNN route whatever the CPU (the route with more ops; the count is the same on every
machine then).

Measured (CPU, torch 2.13.0): StructFormer 2 × 32 with 4 heads dispatched 1,626 ops before issue 45's changes (its
attention core looped over the heads), 969 after, 961 now; UDGN 2 × 32 with 4 heads (already batched over heads)
674 before, 595 after (fewer views, casts and copies in its core, the linear maps' and the dropout masks' ops), 582
now.  The bounds sit between.

The route a CUDA device takes (``kernels.device_route``: torch's own ops), counted the same way on the CPU:
StructFormer 716, UDGN 374 with its LSTM one direction at a time (the default on every device;
``DEPINDUCE_LSTM_ROUTE=packed``: over a packed batch torch's CPU LSTM runs step by step, 1,691 ops, where CUDA
makes one cuDNN call per layer).  The bounds leave about a tenth of room.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from depinduce.data.vocab import Vocab
from depinduce.models.layers import kernels
from depinduce.models.layers.kernels import device_route
from depinduce.models.structformer import StructFormer, StructFormerConfig
from depinduce.models.udgn import UDGN, UDGNConfig
from depinduce.training.objectives import LossModule, MaskedLM

VOCAB = Vocab([f"w{i}" for i in range(60)])


@contextmanager
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def batch() -> dict[str, torch.Tensor]:
    """A prepared masked-LM batch: 4 sentences of 12, 9, 7 and 12 words, 30% of the words masked."""
    generator = torch.Generator().manual_seed(0)
    lengths = torch.tensor([12, 9, 7, 12])
    mask = torch.arange(12)[None, :] < lengths[:, None]
    tokens = torch.randint(4, len(VOCAB), (4, 12), generator=generator).masked_fill(~mask, 0)
    return MaskedLM(0.3).prepare(tokens, mask, generator=generator)


def step_ops(model: torch.nn.Module) -> int:
    """Top-level aten ops of the masked-LM loss and its backward (after one unprofiled step)."""
    model.train()
    loss_module = LossModule(model, MaskedLM(0.3))
    inputs = batch()
    with one_thread():
        torch.manual_seed(0)
        loss_module(**inputs)[0].backward()
        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            loss_module(**inputs)[0].backward()
    count = 0
    for event in profiler.events():
        if not event.name.startswith("aten::"):
            continue
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        count += parent is None
    return count


def structformer() -> StructFormer:
    return StructFormer(StructFormerConfig(hidden_size=32, n_layers=2, n_heads=4, ff_size=64, dropatt=0.1), VOCAB)


def udgn() -> UDGN:
    return UDGN(UDGNConfig(hidden_size=32, n_layers=2, n_heads=4, head_size=8, parser_layers=2,
                           parser_hidden_size=16), VOCAB)


@pytest.mark.parametrize(("name", "build", "bound"), [("structformer", structformer, 1_100), ("udgn", udgn, 630)])
def test_a_training_step_dispatches_few_ops(name: str, build, bound: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "onednn_linear_pays", lambda: True)  # one linear-map route on every CPU
    torch.manual_seed(0)
    ops = step_ops(build())
    assert 0 < ops <= bound, f"{name}: {ops} ops in one forward + loss + backward (bound {bound})"


@pytest.mark.parametrize(("name", "build", "bound"), [("structformer", structformer, 790), ("udgn", udgn, 410)])
def test_the_route_a_gpu_takes_dispatches_few_ops(name: str, build, bound: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEPINDUCE_LSTM_ROUTE", raising=False)  # the default: per direction
    torch.manual_seed(0)
    with device_route():
        ops = step_ops(build())
    assert 0 < ops <= bound, f"{name}: {ops} ops in one forward + loss + backward (bound {bound})"
