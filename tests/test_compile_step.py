"""``train.compile`` (training/compiled_step.py): the setting and its refusals, torch.compile of the static-shape
step, tf32 and fused Adam.

While ``torch.compile`` traces, the backends' fused CPU kernels step aside for plain torch ops
(``models/layers/kernels.plain_ops``), so StructFormer's and UDGN's forward and loss trace as one graph; the
equivalence checks compile through AOTAutograd with the ``aot_eager`` backend (the graphs inductor compiles,
without its C++ build, which takes minutes on a small machine), and one smoke test runs inductor itself on the
tiny test model (skipped, saying so, where there is no C compiler).
"""

from __future__ import annotations

import contextlib
import copy
import random
import shutil
from pathlib import Path

import pytest
import torch

from depinduce.data.vocab import Vocab
from depinduce.errors import RecipeError
from depinduce.models.layers.kernels import device_route
from depinduce.models.neural import pad_batch
from depinduce.training.compiled_step import build_step, check_compile, compiled, configure_dynamo
from depinduce.training.config import TrainConfig, resolve_config
from depinduce.training.engine import TrainOptions, train, trainable_class
from depinduce.training.objectives import LossModule, objective_for
from depinduce.training.optim import build_optimizer, clip_gradients
from depinduce.training.precision import autocast, check_precision
from depinduce.training.shapes import IGNORE, StaticLoss, pad_inputs
from training_support import TinyConfig, TinyMLM, make_data, one_thread, tiny_plugin  # noqa: F401 (fixtures)

VOCAB = Vocab([f"w{i}" for i in range(40)])
TINY = {
    "structformer": {"hidden_size": 16, "n_layers": 2, "n_heads": 4, "ff_size": 32, "dropout": 0.0, "dropatt": 0.0},
    "udgn": {"hidden_size": 16, "n_layers": 2, "n_heads": 4, "head_size": 6, "parser_layers": 2,
             "parser_hidden_size": 16, "dropout": 0.0, "dropatt": 0.0},
    "prpn": {"emb_size": 12, "hidden_size": 16, "n_layers": 2, "n_slots": 4, "lookback": 2, "dropout": 0.0,
             "idropout": 0.0, "rdropout": 0.0},
    "probformer": {"d": 8, "n_channels": 3, "n_iter": 3, "rank": 4, "distance_threshold": 2, "dropout": 0.0,
                   "ternary_l2": 5e-4},
}
MLM = objective_for("mlm", mask_rate=0.3, vocab_size=len(VOCAB))
LM = objective_for("lm", mask_rate=0.0, vocab_size=len(VOCAB))  # PRPN's: sentence by sentence
OBJECTIVE = {"structformer": "mlm", "udgn": "mlm", "prpn": "lm", "probformer": "mlm"}
needs_compiler = pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None,
                                    reason="inductor compiles C++ on the CPU and no C compiler (gcc/cc) is here")


def _config(*items: str) -> TrainConfig:
    return resolve_config(model_name="tiny-mlm", model_config_class=TinyConfig, overrides=items).train


def test_compile_is_a_validated_setting_and_off_by_default() -> None:
    assert TrainConfig().execution.compile == "off" and TrainConfig().execution.precision == "fp32"
    assert _config("compile=off").execution.compile == "off"  # YAML's bare off (a boolean) is taken as the word
    assert _config("compile=on").execution.compile == "default"
    assert _config("compile=reduce-overhead", "prefetch=on").execution.prefetch == "on"
    with pytest.raises(RecipeError, match=r"^--set compile=fast: train.compile must be one of 'off', 'on', "
                                          r"'default', 'reduce-overhead', 'cudagraphs' or true or false, not 'fast'$"):
        _config("compile=fast")


def test_compile_is_refused_in_one_line_where_it_is_not_checked() -> None:
    check_compile("off", "cpcfg")
    check_compile("default", "structformer")
    check_compile("cudagraphs", "prpn")
    with pytest.raises(RecipeError, match=r"^train.compile: model 'cpcfg' is not checked under torch.compile "
                                          r".*structformer, udgn, prpn, probformer only\); set compile: off$"):
        check_compile("reduce-overhead", "cpcfg")
    model = TinyMLM(TinyConfig(), VOCAB)
    with pytest.raises(RecipeError, match=r"^train.compile runs the step on static shapes, which static_shapes: "
                                          r"off turns off; set compile: off or static_shapes: auto$"):
        build_step(model, MLM, LossModule(model, MLM), _config("compile=default", "static_shapes=off"),
                   pad_index=VOCAB.pad_index)
    chunked = objective_for("mlm", mask_rate=0.3, vocab_size=len(VOCAB), loss_chunks=2)
    step = build_step(model, chunked, LossModule(model, chunked), _config("compile=default", "loss_chunks=2"),
                      pad_index=VOCAB.pad_index)  # loss_chunks: each run padded on its own
    assert isinstance(step.module, StaticLoss) and step.pad is not None


def test_a_run_of_an_unchecked_backend_refuses_compile(tmp_path: Path, tiny_plugin: Path) -> None:
    data = make_data(tmp_path / "data", n_train=20, n_dev=4, gold_dev=False)
    with pytest.raises(RecipeError, match=r"^train.compile: model 'tiny-mlm' is not checked under torch.compile"):
        train(TrainOptions(data_dir=data, run_dir=tmp_path / "run", model="tiny-mlm", overrides=("compile=on",),
                           quiet=True), log=lambda _: None)
    assert not (tmp_path / "run" / "last.pt").exists()


def test_tf32_is_refused_on_the_cpu_in_one_line_and_adds_no_autocast() -> None:
    with pytest.raises(RecipeError, match=r"^train.precision: tf32 changes CUDA's float32 products only; on cpu"):
        check_precision("tf32", "prpn", False, torch.device("cpu"), lambda _: None)
    check_precision("tf32", "prpn", False, torch.device("cuda"), lambda _: None)  # every backend, on CUDA
    assert not torch.is_autocast_enabled()
    with autocast("tf32", torch.device("cpu")):
        assert not torch.is_autocast_enabled("cpu")


def test_adam_is_fused_unless_the_setting_says_otherwise() -> None:
    params = [torch.nn.Parameter(torch.zeros(3))]
    assert build_optimizer(params, TrainConfig()).defaults["fused"]
    for optimizer in ("adam", "adamw"):
        unfused = build_optimizer(params, _config("fused_adam=false", f"optimizer={optimizer}"))
        assert not unfused.defaults.get("fused") and unfused.defaults.get("foreach") is None  # torch's default


def test_the_fused_update_is_the_loops_to_round_off_and_clipping_is_bit_for_bit() -> None:
    """20 steps of Adam with L2 (the recipes' weight decay) and clipping on float32 and float64 parameters."""
    runs = []
    for fused in ("true", "false"):
        torch.manual_seed(0)
        params = [torch.nn.Parameter(torch.randn(40, 30)), torch.nn.Parameter(torch.randn(7, dtype=torch.float64))]
        optimizer = build_optimizer(params, _config(f"fused_adam={fused}", "lr=1e-2", "weight_decay=1e-3"))
        generator = torch.Generator().manual_seed(1)
        norms = []
        for _ in range(20):
            for p in params:
                p.grad = torch.randn(p.shape, generator=generator, dtype=p.dtype)
            norms.append(clip_gradients(params, 0.25))
            optimizer.step()
        runs.append((params, norms))
    (fused, fused_norms), (loop, loop_norms) = runs
    assert fused_norms[0] == loop_norms[0]  # the same gradients, the same norm
    for a, b in zip(fused, loop):
        assert not torch.equal(a, b) or a.dtype == torch.float64  # a different kernel ...
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)  # ... the same update to round-off
    # the clipping: torch's loop over the parameters, bit for bit
    torch.manual_seed(2)
    params = [torch.nn.Parameter(torch.zeros(n)) for n in (5, 300, 41)]
    twins = [torch.nn.Parameter(torch.zeros(n)) for n in (5, 300, 41)]
    for p, twin in zip(params, twins):
        p.grad = torch.randn(p.shape)
        twin.grad = p.grad.clone()
    assert torch.equal(clip_gradients(params, 0.25), torch.nn.utils.clip_grad_norm_(twins, 0.25, foreach=False))
    assert all(torch.equal(p.grad, twin.grad) for p, twin in zip(params, twins))


def test_the_cuda_graph_modes_say_what_they_do_off_cuda() -> None:
    said: list[str] = []
    module = torch.nn.Linear(2, 2)
    assert compiled(module, "off", torch.device("cpu"), said.append) is module and not said
    compiled(module, "reduce-overhead", torch.device("cpu"), said.append)
    compiled(module, "cudagraphs", torch.device("cpu"), said.append)
    assert said == ["note: compile reduce-overhead captures CUDA graphs; on cpu it acts as default",
                    "note: compile cudagraphs captures CUDA graphs; on cpu its graphs run uncaptured"]
    assert _config("compile=cudagraphs").execution.compile == "cudagraphs"


@pytest.mark.slow
def test_twenty_steps_under_compile_cudagraphs_match_eager(one_thread) -> None:
    """``compile: cudagraphs`` off CUDA: AOTAutograd's graphs of the static-shape step, run as they are."""
    with device_route():
        (eager_losses, _), (losses, _) = _eager_and_compiled(_backend("structformer"), "cudagraphs", "inductor")
    assert eager_losses[0] != eager_losses[-1]
    torch.testing.assert_close(losses, eager_losses, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name, options", [("structformer", {"margin": "batch", "dropout": 0.1, "dropatt": 0.1}),
                                           ("udgn", {"dropout": 0.2, "dropatt": 0.1}),
                                           ("prpn", {"dropout": 0.2, "idropout": 0.2, "rdropout": 0.1}),
                                           ("probformer", {"dropout": 0.15, "recompute": True})])
def test_the_steps_graphs_hold_nothing_cuda_graphs_refuse(name: str, options: dict, one_thread) -> None:
    """What torch checks before it captures a graph (``reduce-overhead``, ``cudagraphs``), checked on the route a
    CUDA device takes: no op that CUDA graphs cannot replay (host reads, data-dependent shapes) and no input the
    graph writes to, in the forward graph or the backward one.  Otherwise torch would run the step uncaptured and
    say so once in its log."""
    checks = pytest.importorskip("torch._inductor.utils", reason="torch's CUDA-graph checks moved")
    mutations = pytest.importorskip("torch._dynamo.backends.cudagraphs", reason="torch's CUDA-graph checks moved")
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    refused: list[object] = []
    graphs: list[int] = []

    def inspect(graph: torch.fx.GraphModule, inputs: list[object]):  # type: ignore[no-untyped-def]
        graphs.append(len(graph.graph.nodes))
        refused.append(checks.get_first_incompatible_cudagraph_node(graph))
        refused.append(mutations.check_for_mutation_ignore_cuda_graph_managed_tensor(graph, 0))
        return make_boxed_func(graph.forward)

    torch._dynamo.reset()
    configure_dynamo()
    with device_route():
        model = _backend(name, **options)
        step = torch.compile(_static_loss(model, OBJECTIVE[name]),
                             backend=aot_autograd(fw_compiler=inspect, bw_compiler=inspect), dynamic=False)
        step(**_static_inputs(_batches(1, 1)[0], torch.Generator().manual_seed(0), OBJECTIVE[name]))[0].backward()
    assert len(graphs) == 2 and min(graphs) > 50  # the forward graph and the backward one, whole
    assert refused == [None] * 4


def _batches(count: int, seed: int) -> list[list[list[int]]]:
    """Batches of 6 sentences of 5 to 8 words: one static shape, (6, 8), so one compilation serves them all."""
    rng = random.Random(seed)
    return [[[rng.randrange(4, 43) for _ in range(rng.randint(5, 8))] for _ in range(6)] for _ in range(count)]


def _static_inputs(rows: list[list[int]], generator: torch.Generator, objective: str = "mlm"
                   ) -> dict[str, torch.Tensor]:
    """The static-shape inputs of ``rows``, the masked positions padded to every position (48): one shape.
    Next-word LM (PRPN): the exact rows (BatchNorm), the length padded."""
    if objective == "lm":
        inputs = pad_inputs("lm", LM.prepare(*pad_batch(rows, VOCAB.pad_index)), VOCAB.pad_index, pad_rows=False)
        assert inputs["tokens"].shape == (6, 8)
        return inputs
    inputs = pad_inputs("mlm", MLM.prepare(*pad_batch(rows, VOCAB.pad_index), generator=generator),
                        VOCAB.pad_index)
    size = inputs["tokens"].numel()
    assert inputs["tokens"].shape == (6, 8) and len(inputs["positions"]) <= size
    inputs["positions"] = torch.cat([inputs["positions"], inputs["positions"].new_zeros(size)])[:size]
    inputs["targets"] = torch.cat([inputs["targets"], inputs["targets"].new_full((size,), IGNORE)])[:size]
    return inputs


def _static_loss(model: torch.nn.Module, objective: str = "mlm") -> StaticLoss:
    if objective == "lm":
        return StaticLoss(model, "lm", mask_index=-1, boundary_index=LM.boundary_index)
    return StaticLoss(model, "mlm", mask_index=VOCAB.mask_index, boundary_index=-1)


def _explained(model: torch.nn.Module, objective: str = "mlm"):
    torch._dynamo.reset()
    configure_dynamo()
    module = _static_loss(model, objective)
    return torch._dynamo.explain(module)(**_static_inputs(_batches(1, 0)[0], torch.Generator(), objective))


def test_the_steps_own_code_traces_without_graph_breaks(one_thread) -> None:
    torch.manual_seed(0)
    explained = _explained(TinyMLM(TinyConfig(dropout=0.0), VOCAB).train())
    assert explained.graph_break_count == 0, [str(b.reason)[:200] for b in explained.break_reasons]
    assert explained.graph_count == 1


def _backend(name: str, **options: object) -> torch.nn.Module:
    torch.manual_seed(0)
    return trainable_class(name).from_config({**TINY[name], **options}, VOCAB).train()


def _route(route: str):
    """The CPU's own route, or (``device``) the route a CUDA device takes, run on the CPU."""
    return device_route() if route == "device" else contextlib.nullcontext()


@pytest.mark.parametrize("route", ["cpu", "device"])
@pytest.mark.parametrize("name, options", [("structformer", {"margin": "batch", "dropout": 0.1, "dropatt": 0.1}),
                                           ("udgn", {"dropout": 0.2, "dropatt": 0.1}),
                                           ("prpn", {"dropout": 0.2, "idropout": 0.2, "rdropout": 0.1}),
                                           ("probformer", {"dropout": 0.15, "recompute": True}),
                                           ("probformer", {"dropout": 0.15, "root": True})])
def test_the_backends_forward_and_loss_trace_without_graph_breaks(name: str, options: dict, route: str,
                                                                   one_thread) -> None:
    """With the paper recipes' options that matter here: StructFormer's batch margin, dropout everywhere; on the
    CPU's route and on the route a CUDA device takes (PRPN's BatchNorm over real positions by masked sums, not
    a selection whose size the data decide); the Probabilistic Transformer with its recipe's ``recompute`` and
    with ``root``."""
    with _route(route):
        explained = _explained(_backend(name, **options), OBJECTIVE[name])
    assert explained.graph_break_count == 0, [str(b.reason)[:200] for b in explained.break_reasons]
    assert explained.graph_count == 1


def test_the_compiled_parent_distribution_takes_the_wide_fallback_without_a_host_read() -> None:
    """StructFormer's parent distribution under the compiler: the device chooses the exact fallback for a
    sentence whose score range leaves float64 (``torch.cond``), with the eager values and gradients, and the
    fast path for a batch without one (the same compiled graph)."""
    from depinduce.models.structformer.parent import parent_distribution
    from depinduce.models.structformer.parser import BIG

    torch._dynamo.reset()
    traced_parent = torch.compile(parent_distribution, backend="aot_eager", fullgraph=True)
    s0, s1 = torch.tensor(0.01, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64)
    for wide in (True, False):
        heights = [[0.0, 2000.0, 700.0, 2500.0, 100.0, 1800.0] if wide else [0.2, -1.0, 0.7, 1.5, 0.1, -0.3],
                   [0.1, 0.5, -0.4]]
        distance = torch.full((2, 6), BIG, dtype=torch.float64)
        distance[0, :5] = torch.tensor([1000.0, 1500.0, 2200.0, 900.0, 1900.0] if wide else
                                       [0.3, -0.2, 1.1, 0.4, -0.6])
        distance[1, :2] = torch.tensor([0.3, -0.2])
        height = torch.full((2, 6), -BIG, dtype=torch.float64)
        mask = torch.zeros((2, 6), dtype=torch.bool)
        for row, values in enumerate(heights):
            height[row, : len(values)] = torch.tensor(values, dtype=torch.float64)
            mask[row, : len(values)] = True
        results = []
        for run in (parent_distribution, traced_parent):
            d, h = distance.clone().requires_grad_(), height.clone().requires_grad_()
            parent, root = run(d, h, mask, s0, s1)
            (parent.sum() + (root * torch.arange(6)).sum()).backward()
            results.append([parent.detach(), root.detach(), d.grad, h.grad])
        for eager, traced in zip(*results):
            torch.testing.assert_close(traced, eager, rtol=1e-9, atol=1e-12)


def _train_twenty(model: torch.nn.Module, loss_of) -> tuple[list[float], list[torch.Tensor]]:
    """20 steps (Adam, clipping) on the same batches and masks; the losses and the first step's gradients."""
    optimizer = build_optimizer(model.parameters(), TrainConfig(lr=1e-2))
    generator = torch.Generator().manual_seed(3)
    losses, first = [], []
    for rows in _batches(20, 1):
        loss = loss_of(rows, generator)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if not first:
            first = [p.grad.clone() for p in model.parameters()]
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses, first


def _eager_and_compiled(model: torch.nn.Module, mode: str, backend: str, objective: str = "mlm"):
    """The engine's eager step (exact batches, the fused kernels) beside the compiled static-shape step."""
    torch._dynamo.reset()
    twin = copy.deepcopy(model)
    exact_objective = LM if objective == "lm" else MLM
    eager = LossModule(model, exact_objective)
    step = compiled(_static_loss(twin, objective), mode, torch.device("cpu"), lambda _: None, backend=backend)
    exact = _train_twenty(model, lambda rows, generator: eager(
        **exact_objective.prepare(*pad_batch(rows, VOCAB.pad_index), generator=generator))[0])
    traced = _train_twenty(twin, lambda rows, generator: step(**_static_inputs(rows, generator, objective))[0])
    return exact, traced


@pytest.mark.slow
@pytest.mark.parametrize("route", ["cpu", "device"])
@pytest.mark.parametrize("name", ["structformer", "udgn", "prpn", "probformer"])
def test_twenty_compiled_steps_match_twenty_eager_steps(name: str, route: str, one_thread) -> None:
    """Through AOTAutograd (forward and backward graphs, as inductor gets them): the same losses over 20 steps
    and the same first gradients, to round-off, on either route."""
    with _route(route):
        (eager_losses, eager_grads), (losses, grads) = _eager_and_compiled(_backend(name), "default", "aot_eager",
                                                                          OBJECTIVE[name])
    assert eager_losses[0] != eager_losses[-1]  # it trained
    torch.testing.assert_close(losses, eager_losses, rtol=1e-5, atol=1e-6)
    for traced, eager in zip(grads, eager_grads):
        torch.testing.assert_close(traced, eager, rtol=1e-4, atol=1e-6)


@needs_compiler
def test_inductor_compiles_the_step_of_the_test_model(one_thread) -> None:
    torch.manual_seed(0)
    try:
        (eager_losses, _), (losses, _) = _eager_and_compiled(TinyMLM(TinyConfig(dropout=0.0), VOCAB).train(),
                                                             "default", "inductor")
    except Exception as error:  # noqa: BLE001 - inductor's own failure to build here
        if "CppCompileError" in type(error).__name__ or "compiler" in str(error).lower()[:300]:
            pytest.skip(f"inductor cannot compile on this machine: {str(error).splitlines()[0]}")
        raise
    assert eager_losses[0] != eager_losses[-1]
    torch.testing.assert_close(losses, eager_losses, rtol=1e-4, atol=1e-5)
