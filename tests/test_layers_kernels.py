"""The shared CPU layers: strided batched products and the recomputation policy (models/layers)."""

from __future__ import annotations

import pytest
import torch

from depinduce.models.layers import memory
from depinduce.models.layers.kernels import bmm_into


def test_bmm_into_a_strided_head_slice_equals_bmm() -> None:
    torch.manual_seed(0)
    a, b = torch.randn(30, 7, 7), torch.randn(30, 7, 5)
    out = torch.zeros(30, 7, 3, 5)  # (B, T, heads, d): head 1's columns are not contiguous
    bmm_into(out[:, :, 1], a, b)
    assert torch.allclose(out[:, :, 1], torch.bmm(a, b), atol=1e-6)
    assert out[:, :, 0].abs().sum() == 0 and out[:, :, 2].abs().sum() == 0
    contiguous = torch.empty(30, 7, 5)
    bmm_into(contiguous, a, b)
    assert torch.allclose(contiguous, torch.bmm(a, b), atol=1e-6)


def test_should_recompute_forced_and_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    assert memory.should_recompute(True, 0) and not memory.should_recompute(False, 10**15)
    monkeypatch.setattr(memory, "available_bytes", lambda: 1000)
    assert memory.should_recompute("auto", 251) and not memory.should_recompute("auto", 250)
    monkeypatch.setattr(memory, "available_bytes", lambda: None)  # unknown: the safe side
    assert memory.should_recompute("auto", 1)


def test_available_bytes_reads_this_machine() -> None:
    available = memory.available_bytes()
    if available is None:
        pytest.skip("no /proc/meminfo here (not Linux)")
    with open("/proc/meminfo", encoding="ascii") as meminfo:
        total = int(next(line for line in meminfo if line.startswith("MemTotal:")).split()[1]) * 1024
    assert 0 < available <= total
