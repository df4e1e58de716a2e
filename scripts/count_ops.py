"""Dispatched aten ops and host syncs per training step of each neural backend (prints a table; not a test).

On a GPU a step of a small or mid-sized model is bound by the host issuing kernels, so the number of ops one
step dispatches is what its speed there follows.  One step is the gradient loop's (``OptimiserStep`` in
``depinduce/training/step.py``): the objective's ``prepare`` on the CPU, the inputs moved to the device,
``LossModule`` (forward and loss), the loss, NLL and count stacked as float64 on the device (read later, every
``log_every`` steps: no host sync in the step), ``zero_grad``, backward, gradient clipping at the recipe's
``clip``, the recipe's optimiser step and its learning-rate schedule (RNGTr's ``updates: per_pass`` makes one
update per refinement pass, as the loop does).

Each backend is built at its paper recipe's ``model_config`` (``structformer-ptb``, ``udgn-ptb``, ``prpn-ptb``,
``probformer-ptb``, ``rngtr-ud``, ``cpcfg-ptb``) over a 10,000-word vocabulary and trained on random batches of
``--batch-tokens`` padded tokens (``--sentences`` sentences of fixed, mixed lengths, the longest filling the
width), one thread, two warm-up steps, then one step under ``torch.profiler``.

How ops are counted: every profiler event whose name starts with ``aten::`` and that has no ``aten::`` event
above it on the same thread (the ops issued from Python or by the autograd engine, not the ops they decompose
into: ``aten::linear`` counts once, its ``aten::t`` and ``aten::addmm`` do not).  Backward ops run on the
autograd engine's thread, under ``autograd::engine::evaluate_function`` events; they count the same way.  Host
syncs: ``aten::_local_scalar_dense`` (``.item()``, ``float(t)``, ``bool(t)``) and ``aten::nonzero`` (boolean
mask indexing, ``nonzero``) events at any depth (until the loop read its numbers in batches, the step's own
three ``float`` reads were among them: the results page's counts include them).  A
``.tolist()`` or ``.cpu()`` of a device tensor also waits for the device but dispatches no such op, so it is
not counted.

The table gives the top-level ops per step and per phase, every aten event, the host syncs, the counts before
issue 45's changes and the issue's targets (in aten events).  ``--fused-optimiser`` shows what a fused
optimiser and foreach clipping would dispatch instead of the engine's optimiser on the CPU (on CUDA the engine
takes torch's foreach or fused routes already).  Results: ``docs/results/2026-11-27-op-counts.md``.

    python scripts/count_ops.py                         # every backend, CPU
    python scripts/count_ops.py --models structformer udgn --fused-optimiser
    python scripts/count_ops.py --models structformer udgn --device cuda
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

RECIPES = {"structformer": "structformer-ptb", "udgn": "udgn-ptb", "prpn": "prpn-ptb",
           "probformer": "probformer-ptb", "rngtr": "rngtr-ud", "cpcfg": "cpcfg-ptb"}
# (top-level ops, aten events) per step measured with this script's defaults before issue 45's changes (CPU,
# commit 37f4080), and the targets where it sets one: a third of the aten events it measured (19,483 and
# 7,793: every aten event, nested ones included, at a 1,024-token batch)
BEFORE: dict[str, tuple[int, int]] = {
    "structformer": (8_354, 19_435), "udgn": (2_703, 7_737), "prpn": (16_272, 35_359),
    "probformer": (14_071, 46_314), "rngtr": (14_249, 45_311), "cpcfg": (7_886, 23_944),
}
TARGET = {"structformer": 6_494, "udgn": 2_597}
VOCAB_SIZE = 10_000
N_UPOS, N_LABELS = 18, 40
SYNC_OPS = ("aten::_local_scalar_dense", "aten::nonzero")
PHASES = ("count_ops::forward", "count_ops::backward", "count_ops::optimiser")  # record_function ranges


def batch_lengths(batch_tokens: int, sentences: int, seed: int) -> list[int]:
    """``sentences`` lengths whose longest × their number is ``batch_tokens`` (lengths between half and all of
    the width, the first one the full width)."""
    width = max(2, batch_tokens // sentences)
    rng = random.Random(seed)
    return [width] + [rng.randint(max(2, width // 2), width) for _ in range(sentences - 1)]


def build(model_name: str, device: Any) -> tuple[Any, Any, Any]:
    """The backend at its paper recipe's model config, its objective and the recipe's train config."""
    import torch

    from depinduce.data.tags import TagVocab
    from depinduce.data.vocab import Vocab
    from depinduce.training.config import load_recipe, resolve_config
    from depinduce.training.defaults import recipe_path
    from depinduce.training.engine import trainable_class
    from depinduce.training.objectives import objective_for

    model_class = trainable_class(model_name)
    resolved = resolve_config(model_name=model_name, model_config_class=model_class.config_class,
                              recipe=load_recipe(recipe_path(RECIPES[model_name])))
    vocab = Vocab([f"w{i}" for i in range(VOCAB_SIZE - 3)])
    tags = TagVocab([f"U{i}" for i in range(N_UPOS)], [f"L{i}" for i in range(N_LABELS)])
    torch.manual_seed(0)
    model = model_class.from_config(resolved.model_config, vocab, where="count_ops", tags=tags).to(device)
    model.train()
    train = resolved.train
    objective = objective_for(model_class.capabilities.objective, mask_rate=train.masked_lm.mask_rate,
                              vocab_size=len(vocab), loss_chunks=train.masked_lm.loss_chunks)
    objective.check_model(model)
    return model, objective, train


def random_inputs(objective: Any, lengths: list[int], generator: Any) -> dict[str, Any]:
    """A prepared batch of random words (and, for the supervised objective, random gold heads, labels and UPOS)."""
    import torch

    width = max(lengths)
    n = torch.tensor(lengths)
    mask = torch.arange(width)[None, :] < n[:, None]
    tokens = torch.randint(4, VOCAB_SIZE, (len(lengths), width), generator=generator).masked_fill(~mask, 0)
    gold: dict[str, Any] = {}
    if objective.needs_gold:
        # a random head in 0..n other than the word itself (position i is word i + 1)
        drawn = (torch.rand((len(lengths), width), generator=generator) * n[:, None]).long()
        heads = drawn + (drawn >= torch.arange(1, width + 1)).long()
        labels = torch.randint(1, N_LABELS + 1, (len(lengths), width), generator=generator)
        upos = torch.randint(2, N_UPOS + 2, (len(lengths), width), generator=generator)
        gold = {"heads": heads.masked_fill(~mask, 0), "labels": labels.masked_fill(~mask, 0),
                "upos": upos.masked_fill(~mask, 0)}
    return objective.prepare(tokens, mask, generator=generator, **gold)


def step_function(model: Any, objective: Any, train: Any, device: Any, fused: bool = False) -> Any:
    """The engine's training step for one prepared batch (see the module docstring), its phases marked with
    ``record_function`` ranges (``PHASES``).  ``fused``: the optimiser as one fused op (``fused=True``) and the
    clipping as foreach ops, in place of what the engine builds (a what-if: the same update to round-off)."""
    import torch
    from torch.profiler import record_function

    from depinduce.training.objectives import LossModule
    from depinduce.training.optim import Schedule, build_optimizer, clip_gradients
    from depinduce.training.precision import autocast
    from depinduce.training.step import step_numbers

    loss_module = LossModule(model, objective)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = build_optimizer(params, train)
    if fused:
        optimizer = type(optimizer)(params, **{**optimizer.defaults, "fused": True, "foreach": None})
    schedule = Schedule(optimizer, train, 1_000_000)
    stepwise = objective.stepwise(model)

    def clip() -> None:
        if fused and train.optimiser.clip is not None:
            torch.nn.utils.clip_grad_norm_(params, train.optimiser.clip, foreach=True)
        else:
            clip_gradients(params, train.optimiser.clip)

    def update(loss: Any) -> None:
        with record_function(PHASES[1]):
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        with record_function(PHASES[2]):
            clip()
            optimizer.step()
            schedule.after_step()

    def step(inputs: dict[str, Any]) -> None:
        inputs = {k: v.to(device, non_blocking=True) for k, v in inputs.items()}
        numbers = []  # left on the device, as the loop leaves them (it reads them every log_every steps)
        if stepwise:
            updates = objective.updates(model, **inputs)
            while True:
                with record_function(PHASES[0]):
                    out = next(updates, None)
                if out is None:
                    return
                numbers.append(step_numbers(out.loss, out.nll_sum, out.count))
                update(out.loss)
        with record_function(PHASES[0]), autocast(train.execution.precision, device):
            loss, nll, count = loss_module(**inputs)
            numbers.append(step_numbers(loss, nll, count))
        update(loss)

    return step


def count_step(model_name: str, device_name: str, batch_tokens: int, sentences: int, seed: int,
               fused: bool = False) -> dict[str, Any]:
    """Ops and host syncs of one profiled training step of ``model_name`` (after two warm-up steps): top-level
    ops in all and per phase, every aten event (nested ones too), host syncs."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(1)
    device = torch.device(device_name)
    model, objective, train = build(model_name, device)
    step = step_function(model, objective, train, device, fused)
    generator = torch.Generator().manual_seed(seed)
    lengths = batch_lengths(batch_tokens, sentences, seed)
    for _ in range(2):
        step(random_inputs(objective, lengths, generator))
    inputs = random_inputs(objective, lengths, generator)
    if device.type == "cuda":
        torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        step(inputs)
        if device.type == "cuda":
            torch.cuda.synchronize()
    return {"backend": model_name, "config": RECIPES[model_name], **count_events(profiler.events())}


def count_events(events: Any) -> dict[str, int]:
    """``ops`` (top-level aten ops), ``all`` (every aten event), ``syncs`` (host-sync ops) and the top-level
    ops of each phase (``forward``, ``backward``, ``optimiser``: by the phase range their start falls in, so
    that backward ops on the autograd engine's device threads count too) among the profiler's events."""
    events = list(events)
    ranges = [(name.split("::")[1], e.time_range.start, e.time_range.end)
              for e in events for name in PHASES if e.name == name]
    counts = {"ops": 0, "all": 0, "syncs": 0, "forward": 0, "backward": 0, "optimiser": 0}
    for event in events:
        if not event.name.startswith("aten::"):
            continue
        counts["all"] += 1
        if event.name in SYNC_OPS:
            counts["syncs"] += 1
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        if parent is None:
            counts["ops"] += 1
            for phase, start, end in ranges:
                if start <= event.time_range.start <= end:
                    counts[phase] += 1
                    break
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", choices=sorted(RECIPES), default=list(RECIPES))
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--batch-tokens", type=int, default=1024, help="padded tokens per batch (default 1024)")
    parser.add_argument("--sentences", type=int, default=32, help="sentences per batch (default 32)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fused-optimiser", action="store_true",
                        help="what-if: a fused Adam/AdamW and foreach clipping instead of the engine's optimiser")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's package, run from anywhere

    print(f"{'backend':<13} {'config':<17} {'ops/step':>9} {'forward':>8} {'backward':>8} {'optimiser':>9} "
          f"{'aten events':>11} {'syncs':>6}   {'before (ops / events)':>21} {'target (events)':>15}")
    for name in args.models:
        row = count_step(name, args.device, args.batch_tokens, args.sentences, args.seed, args.fused_optimiser)
        before = BEFORE.get(name)
        target = TARGET.get(name)
        print(f"{row['backend']:<13} {row['config']:<17} {row['ops']:>9,} {row['forward']:>8,} "
              f"{row['backward']:>8,} {row['optimiser']:>9,} {row['all']:>11,} {row['syncs']:>6,}   "
              f"{'' if before is None else f'{before[0]:,} / {before[1]:,}':>21} "
              f"{'' if target is None else f'≤ {target:,}':>15}", flush=True)

if __name__ == "__main__":
    main()
