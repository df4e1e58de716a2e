"""The shared CPU layers: strided batched products, the fused output layer and loss, and the recomputation policy
(models/layers)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from depinduce.errors import UsageError
from depinduce.models.layers import memory
from depinduce.models.layers import kernels
from depinduce.models.layers.kernels import bmm_into, position_linear, rows_linear
from depinduce.models.layers.output_loss import linear_cross_entropy


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


def _output_loss_and_gradients(fused: bool, rows: int, dtype: torch.dtype, bf16: bool) -> list[torch.Tensor]:
    """Summed NLL of a 300-word output layer over ``rows`` hidden states, divided by the rows as the objective
    does, and the gradients of x, weight and bias: fused, or rows_linear + F.cross_entropy under autograd."""
    generator = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 24, dtype=dtype, generator=generator).requires_grad_()
    weight = (0.3 * torch.randn(300, 24, dtype=dtype, generator=generator)).requires_grad_()
    bias = (0.1 * torch.randn(300, dtype=dtype, generator=generator)).requires_grad_()
    targets = torch.randint(0, 300, (rows,), generator=generator)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        if fused:
            nll = linear_cross_entropy(x, weight, bias, targets)
        else:
            logits = rows_linear(x, weight, bias)
            nll = F.cross_entropy(logits if logits.dtype == dtype else logits.float(), targets, reduction="sum")
        (nll / max(rows, 1)).backward()
    assert x.grad is not None and weight.grad is not None and bias.grad is not None
    return [nll.detach(), x.grad, weight.grad, bias.grad]


@pytest.mark.parametrize("rows", [5, 37, 600])  # below and above rows_linear's 16-row fold; several chunks
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_linear_cross_entropy_is_the_output_layer_and_loss_of_autograd(rows: int, dtype: torch.dtype) -> None:
    fused = _output_loss_and_gradients(True, rows, dtype, bf16=False)
    plain = _output_loss_and_gradients(False, rows, dtype, bf16=False)
    tolerance = 1e-5 if dtype == torch.float32 else 1e-12
    for mine, autograd in zip(fused, plain, strict=True):
        assert mine.dtype == dtype
        assert torch.allclose(mine, autograd, rtol=tolerance, atol=tolerance * float(autograd.abs().max()))


@pytest.mark.parametrize("rows", [7, 600])
def test_linear_cross_entropy_under_bf16_autocast_makes_autocasts_casts(rows: int) -> None:
    """Under autocast the loss is the float32 softmax of bfloat16 logits, as autograd's; the gradients agree
    within bfloat16 rounding (the 1/rows scale is applied after the bfloat16 products instead of before)."""
    fused = _output_loss_and_gradients(True, rows, torch.float32, bf16=True)
    plain = _output_loss_and_gradients(False, rows, torch.float32, bf16=True)
    assert torch.allclose(fused[0], plain[0], rtol=1e-5)
    for mine, autograd in zip(fused[1:], plain[1:], strict=True):
        assert mine.dtype == torch.float32
        assert (mine - autograd).abs().max() <= 2 ** -7 * autograd.abs().max()
    in_float32 = _output_loss_and_gradients(True, rows, torch.float32, bf16=False)
    assert not torch.equal(fused[0], in_float32[0])  # the products did run in bfloat16


def test_linear_cross_entropy_passes_gradcheck_and_needs_no_gradients() -> None:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(20, 6, dtype=torch.float64, generator=generator, requires_grad=True)
    weight = torch.randn(11, 6, dtype=torch.float64, generator=generator, requires_grad=True)
    bias = torch.randn(11, dtype=torch.float64, generator=generator, requires_grad=True)
    targets = torch.randint(0, 11, (20,), generator=generator)
    assert torch.autograd.gradcheck(lambda *a: 3.0 * linear_cross_entropy(*a, targets), (x, weight, bias))
    with torch.no_grad():  # evaluation: the plain computation, nothing kept
        expected = F.cross_entropy(F.linear(x, weight, bias), targets, reduction="sum")
        assert torch.allclose(linear_cross_entropy(x, weight, bias, targets), expected)
    empty = linear_cross_entropy(x[:0], weight, bias, targets[:0])
    assert float(empty.detach()) == 0.0 and empty.requires_grad


@pytest.mark.parametrize("bf16", [False, True])
def test_linear_cross_entropy_backward_twice_through_a_kept_graph_gives_the_same_gradients(bf16: bool) -> None:
    """Backward scales the gradients kept from forward in place only on a widened copy (bfloat16 under
    autocast); a graph kept for a second backward must still hold the unscaled ones."""
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(40, 8, generator=generator, requires_grad=True)
    weight = torch.randn(13, 8, generator=generator, requires_grad=True)
    bias = torch.randn(13, generator=generator, requires_grad=True)
    targets = torch.randint(0, 13, (40,), generator=generator)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = linear_cross_entropy(x, weight, bias, targets) / 40
    grads = []
    for _ in range(2):
        grads.append([g.clone() for g in torch.autograd.grad(loss, (x, weight, bias), retain_graph=True)])
    for first, second in zip(*grads, strict=True):
        assert first.dtype == torch.float32 and torch.equal(first, second) and first.abs().sum() > 0


_CACHE_PROBE = """
import ctypes, sys, torch
from depinduce.models.layers.memory import limit_onednn_primitive_cache
if sys.argv[1] == "limited":
    limit_onednn_primitive_cache()
info = ctypes.CDLL("libc.so.6").mallinfo2
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
info.restype = Info
def used():
    now = info()
    return now.uordblks + now.hblkhd
weight = torch.randn(2048, 256, dtype=torch.bfloat16)
start = used()
for rows in range(1000, 1200):  # a new product shape each time, as length-bucketed batches give
    torch.nn.functional.linear(torch.randn(rows, 256, dtype=torch.bfloat16), weight)
print(used() - start)
"""


@pytest.mark.slow
def test_the_backends_bound_the_bfloat16_product_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """ideep keeps a primitive per bfloat16 product shape (``LRU_CACHE_CAPACITY``, 1024 by default): ~55 MB of
    live heap over 200 shapes here.  The backends' cap of 32 entries stops it at ~9 MB; a value the user set is
    kept."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallinfo2  # noqa: B018 - glibc >= 2.33
    except (OSError, AttributeError):
        pytest.skip("needs glibc's mallinfo2 to read the live heap")
    for variable in (memory.ONEDNN_CACHE_VARIABLE, memory.IDEEP_CACHE_VARIABLE):
        monkeypatch.delenv(variable, raising=False)

    def growth(mode: str) -> int:
        run = subprocess.run([sys.executable, "-c", _CACHE_PROBE, mode], capture_output=True, text=True,
                             check=True, env={**os.environ, memory.ONEDNN_CACHE_VARIABLE: "0"})
        return int(run.stdout)

    unlimited = growth("default")
    if unlimited < 30 * 2**20:
        pytest.skip(f"bfloat16 products keep no per-shape cache on this CPU ({unlimited} bytes over 200 shapes)")
    assert growth("limited") < 16 * 2**20
    monkeypatch.setenv(memory.IDEEP_CACHE_VARIABLE, "7")
    memory.limit_onednn_primitive_cache()
    assert os.environ[memory.IDEEP_CACHE_VARIABLE] == "7"


@pytest.mark.parametrize("capability", ["AVX512", "AVX2"])
def test_linear_maps_choose_their_kernel_by_the_cpu_and_compute_the_same(
        capability: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """oneDNN's convolution kernels on CPUs with AVX-512, MKL's F.linear elsewhere: the same values and
    gradients."""
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    kernels.onednn_linear_pays.cache_clear()
    try:
        generator = torch.Generator().manual_seed(1)
        x = torch.randn(3, 5, 8, generator=generator, requires_grad=True)
        weight = torch.randn(6, 8, generator=generator, requires_grad=True)
        bias = torch.randn(6, generator=generator, requires_grad=True)
        assert kernels._use_onednn(x) == (capability == "AVX512" and torch.backends.mkldnn.is_available())
        out = position_linear(x, weight, bias)
        expected = F.linear(x.detach(), weight.detach(), bias.detach())
        assert torch.allclose(out, expected, atol=1e-5)
        out.square().sum().backward()
        assert x.grad is not None and weight.grad is not None
        assert torch.allclose(x.grad, 2 * expected @ weight.detach(), atol=1e-4)
        assert torch.allclose(weight.grad, 2 * expected.reshape(-1, 6).t() @ x.detach().reshape(-1, 8), atol=1e-4)
    finally:
        kernels.onednn_linear_pays.cache_clear()


@pytest.mark.parametrize("forced", ["onednn", "mkl", "MKL "])
def test_the_linear_kernel_choice_can_be_forced_for_measuring_both(
        forced: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """DEPINDUCE_LINEAR_KERNEL overrides the CPU's choice either way (scripts/bench_linear.py measures both), with
    the same numbers."""
    monkeypatch.setenv(kernels.LINEAR_KERNEL_VARIABLE, forced)
    for capability in ("AVX512", "AVX2"):
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
        kernels.onednn_linear_pays.cache_clear()
        try:
            assert kernels.onednn_linear_pays() == (forced == "onednn")
            x = torch.randn(2, 4, 8)
            weight, bias = torch.randn(5, 8), torch.randn(5)
            assert torch.allclose(position_linear(x, weight, bias), F.linear(x, weight, bias), atol=1e-5)
        finally:
            kernels.onednn_linear_pays.cache_clear()


def test_an_unknown_linear_kernel_is_a_one_line_error(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(kernels.LINEAR_KERNEL_VARIABLE, "blas")
    kernels.onednn_linear_pays.cache_clear()
    try:
        with pytest.raises(UsageError, match="DEPINDUCE_LINEAR_KERNEL='blas': expected onednn or mkl"):
            kernels.onednn_linear_pays()
    finally:
        kernels.onednn_linear_pays.cache_clear()
    (tmp_path / "in.txt").write_text("The dog barks .\n")
    env = dict(os.environ, DEPINDUCE_LINEAR_KERNEL="blas")
    result = subprocess.run([sys.executable, "-m", "depinduce", "parse", "in.txt"],  # the bundled UDGN
                            capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "DEPINDUCE_LINEAR_KERNEL='blas': expected onednn or mkl (or unset: chosen by the CPU)")
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("zeros", [0, 1, 3])
def test_the_device_routes_cumprod_has_torchs_gradient_without_a_host_read(zeros: int) -> None:
    """Off the CPU's route ``cumprod_last``'s backward is the zero-safe formula: torch's gradient, with zeros
    among the factors too (PRPN's hard gates), and no ``_local_scalar_dense`` (torch's backward reads one)."""
    from torch.profiler import ProfilerActivity, profile

    from depinduce.models.layers.cumprod import cumprod_last
    from depinduce.models.layers.kernels import device_route

    generator = torch.Generator().manual_seed(zeros)
    x = torch.rand(4, 3, 6, dtype=torch.float64, generator=generator)
    x.view(-1)[torch.randperm(x.numel(), generator=generator)[:zeros]] = 0.0
    x.requires_grad_(True)
    upstream = torch.randn(x.shape, dtype=torch.float64, generator=generator)
    want = torch.autograd.grad(x.cumprod(-1), x, upstream)[0]
    with device_route():
        out = cumprod_last(x)
        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            got = torch.autograd.grad(out, x, upstream)[0]
    torch.testing.assert_close(out, x.cumprod(-1), rtol=0, atol=0)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-14)
    assert not [e for e in profiler.events() if e.name == "aten::_local_scalar_dense"]
