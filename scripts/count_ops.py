"""Dispatched aten ops and host syncs per training step of each neural backend (prints a table; not a test).

On a GPU a step of a small or mid-sized model is bound by the host issuing kernels, so the number of ops one
step dispatches is what its speed there follows.  One step is the gradient loop's (``OptimiserStep`` in
``depinduce/training/step.py``): the objective's ``prepare`` on the CPU, the inputs moved to the device,
``LossModule`` (forward and loss; on the device route the index-gathering loss of ``training/shapes.py`` the
engine takes on CUDA, its index made on the CPU beforehand, on the exact batch unless compiled; ``--exact``: the
exact ``LossModule`` everywhere, as counts before 2026-11-27's GPU check were made), the loss, NLL and count
stacked as float64 on the device (read later, every ``log_every`` steps: no host sync in the step),
``zero_grad``, backward, gradient clipping at the recipe's ``clip``, the recipe's optimiser step and its
learning-rate schedule (RNGTr's ``updates: per_pass`` makes one update per refinement pass, as the loop does).

Each backend is built at its paper recipe's ``model_config`` (``structformer-ptb``, ``udgn-ptb``, ``prpn-ptb``,
``probformer-ptb``, ``rngtr-ud``, ``cpcfg-ptb``) over a 10,000-word vocabulary and trained on random batches of
``--batch-tokens`` padded tokens (``--sentences`` sentences of fixed, mixed lengths, the longest filling the
width; ``--bucketed``: nearly equal lengths, as the engine batches them), one thread, two warm-up steps, then
one step under ``torch.profiler``.

How ops are counted: every profiler event whose name starts with ``aten::`` and that has no ``aten::`` event
above it on the same thread (the ops issued from Python or by the autograd engine, not the ops they decompose
into: ``aten::linear`` counts once, its ``aten::t`` and ``aten::addmm`` do not).  Backward ops run on the
autograd engine's thread, under ``autograd::engine::evaluate_function`` events; they count the same way.  Host
syncs: ``aten::_local_scalar_dense`` (``.item()``, ``float(t)``, ``bool(t)``) and ``aten::nonzero`` (boolean
mask indexing, ``nonzero``) events at any depth but inside a fused optimiser op (see :func:`count_events`;
until the loop read its numbers in batches, the step's own three ``float`` reads were among them: the results
page's counts before include them).  A ``.tolist()`` or ``.cpu()`` of a device tensor also waits for the device
but dispatches no such op, so it is not counted.  "of them RNN": the events of recurrent layers, forward and
backward (UDGN's parser).

Two routes (``--route``): ``cpu``, what a step on the CPU runs (its oneDNN linear maps, custom autograd
Functions, bit-packed dropout masks, the LSTM one direction at a time), and ``device``, the route a CUDA
device takes, run on the CPU (``depinduce.models.layers.kernels.device_route``: torch's own ops and dropout;
the LSTM one direction at a time there too unless ``DEPINDUCE_LSTM_ROUTE=packed``): the ops a GPU step
dispatches, counted without a GPU.  The top-level ops of the device route are the GPU's; some of its nested
events are the CPU's way of running them: torch's foreach and fused optimiser ops, which CUDA runs as a few
multi-tensor kernels, loop over the tensors on the CPU, ``dropout`` draws and scales in several ops there, and an
LSTM runs step by step (one cuDNN call per layer and direction on CUDA); ``--device cuda`` counts on the GPU
itself.

"CPU-only": the nested events that only the CPU's way of running an op adds (below a foreach or fused
optimiser op, below ``dropout`` but its ``native_dropout``, a Python number's cast, an RNN's step loop; see
:func:`count_events`); "less CPU-only" is what remains, the count to set beside a GPU's.

The table gives the top-level ops per step and per phase, every aten event, the host syncs, the counts before
issue 45's changes (the CPU route at commit 37f4080) and the issue's targets (in aten events).  The optimiser is
the recipe's (``fused_adam``, default true: torch's fused Adam); ``--unfused-adam`` counts torch's default
update instead.  Results: ``docs/results/2026-11-27-op-counts.md``.

    python scripts/count_ops.py                         # every backend, both routes, CPU
    python scripts/count_ops.py --models structformer udgn --route device
    python scripts/count_ops.py --models structformer udgn --device cuda
    python scripts/count_ops.py --models rngtr --route device --sites   # where each host sync is made
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
RNN_OPS = ("aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu")
PHASES = ("count_ops::forward", "count_ops::backward", "count_ops::optimiser")  # record_function ranges


def batch_lengths(batch_tokens: int, sentences: int, seed: int, bucketed: bool = False) -> list[int]:
    """``sentences`` lengths whose longest × their number is ``batch_tokens``, the first one the full width, the
    others between half and all of it, or (``bucketed``) the width or one less, as the engine's length-bucketed
    batches have them."""
    width = max(2, batch_tokens // sentences)
    rng = random.Random(seed)
    shortest = max(2, width - 1 if bucketed else width // 2)
    return [width] + [rng.randint(shortest, width) for _ in range(sentences - 1)]


def build(model_name: str, device: Any, fused_adam: bool = True) -> tuple[Any, Any, Any]:
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
                              recipe=load_recipe(recipe_path(RECIPES[model_name])),
                              overrides=() if fused_adam else ("fused_adam=false",))
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


def step_function(model: Any, objective: Any, train: Any, device: Any, shapes_as: Any = None) -> Any:
    """The engine's training step for one prepared batch (see the module docstring), its phases marked with
    ``record_function`` ranges (``PHASES``); with ``shapes_as`` (a device) on the batch shapes the engine takes
    on that device (``static_shapes: auto``, not compiled: the loss's index made on the CPU for CUDA, the exact
    loss on the CPU), else with the exact loss."""
    import torch
    from torch.profiler import record_function

    from depinduce.data.vocab import Vocab
    from depinduce.training.compiled_step import build_step
    from depinduce.training.objectives import LossModule
    from depinduce.training.optim import Schedule, build_optimizer, clip_gradients
    from depinduce.training.precision import autocast
    from depinduce.training.step import step_numbers

    loss_module = LossModule(model, objective)
    stepwise = objective.stepwise(model)
    if shapes_as is not None:
        built = build_step(model, objective, loss_module, train, pad_index=Vocab.pad_index, stepwise=stepwise,
                           device=shapes_as)
        loss_module, pad = built.module, built.pad
    else:
        pad = None
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = build_optimizer(params, train)
    schedule = Schedule(optimizer, train, 1_000_000)

    def update(loss: Any) -> None:
        with record_function(PHASES[1]):
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        with record_function(PHASES[2]):
            clip_gradients(params, train.optimiser.clip)
            optimizer.step()
            schedule.after_step()

    def step(inputs: dict[str, Any]) -> None:
        """One step on a batch that ``step.pad`` has prepared (the engine pads on the CPU, ahead of the step)."""
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

    step.pad = pad if pad is not None else (lambda inputs: inputs)  # type: ignore[attr-defined]
    return step


def count_step(model_name: str, device_name: str, batch_tokens: int, sentences: int, seed: int,
               route: str = "cpu", fused_adam: bool = True, bucketed: bool = False,
               sites: bool = False, exact: bool = False) -> dict[str, Any]:
    """Ops and host syncs of one profiled training step of ``model_name`` (after two warm-up steps) on ``route``
    (``cpu`` or ``device``): top-level ops in all and per phase, every aten event (nested ones too), host
    syncs; with ``sites``, where in the code each host sync was made (``sync_sites``).  The batch takes the
    shapes the engine gives it on the route's device (the device route's as CUDA's), or with ``exact`` the
    exact batch whatever the device."""
    import contextlib

    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(1)
    device = torch.device(device_name)
    if route == "device":
        from depinduce.models.layers.kernels import device_route
    with device_route() if route == "device" else contextlib.nullcontext():
        model, objective, train = build(model_name, device, fused_adam)
        shapes_as = None if exact else torch.device("cuda") if route == "device" else device
        step = step_function(model, objective, train, device, shapes_as)
        generator = torch.Generator().manual_seed(seed)
        lengths = batch_lengths(batch_tokens, sentences, seed, bucketed)
        for _ in range(2):
            step(step.pad(random_inputs(objective, lengths, generator)))
        inputs = step.pad(random_inputs(objective, lengths, generator))
        if device.type == "cuda":
            torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU], with_stack=sites) as profiler:
            step(inputs)
            if device.type == "cuda":
                torch.cuda.synchronize()
    events = profiler.events()
    found = {"sync_sites": sync_sites(events)} if sites else {}
    return {"backend": model_name, "config": RECIPES[model_name], **count_events(events), **found}


def sync_sites(events: Any) -> list[tuple[int, str]]:
    """(count, where) of the host syncs :func:`count_events` counts, ``where`` being the innermost Python
    frames of depinduce (or of torch, when depinduce made the call from autograd's engine) above each, most
    frequent first (the profiler must have recorded stacks: ``with_stack=True``)."""
    from collections import Counter

    counts: Counter[str] = Counter()
    for event in events:
        if event.name not in SYNC_OPS or _top(event).name.startswith("aten::_fused_"):
            continue
        frames, parent = [], event.cpu_parent
        while parent is not None:
            if ".py(" in parent.name:
                frames.append(parent.name.split("site-packages/")[-1])
            parent = parent.cpu_parent
        ours = [frame for frame in frames if frame.startswith("depinduce/")]
        counts[" < ".join((ours or frames)[:2]) or "(no Python frame)"] += 1
    return [(count, where) for where, count in counts.most_common()]


def _top(event: Any) -> Any:
    """The outermost aten event above ``event`` on its thread (``event`` itself when none is)."""
    top, parent = event, event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            top = parent
        parent = parent.cpu_parent
    return top


def _below(event: Any) -> int:
    """aten events at any depth below ``event``."""
    count, stack = 0, list(event.cpu_children)
    while stack:
        child = stack.pop()
        count += child.name.startswith("aten::")
        stack.extend(child.cpu_children)
    return count


def count_events(events: Any) -> dict[str, int]:
    """``ops`` (top-level aten ops), ``all`` (every aten event), ``syncs`` (host-sync ops), ``rnn`` (the
    events of recurrent layers, forward and backward) and the top-level ops of each phase (``forward``,
    ``backward``, ``optimiser``: by the phase range their start falls in, so that backward ops on the autograd
    engine's device threads count too) among the profiler's events.

    Syncs inside a fused optimiser op are not counted: on the CPU its kernel reads each parameter's step count
    from a CPU tensor (no device to wait for), on CUDA it reads none.  ``rnn``: the events under a top-level
    ``aten::lstm`` (``gru``, ``rnn_tanh``, ``rnn_relu``) and under the backward functions of the ops recorded
    there (matched by the autograd sequence number the profiler gives both) — on the CPU an RNN over a packed
    batch runs step by step, an op per gate and time step, where CUDA makes one cuDNN call per layer."""
    events = list(events)
    ranges = [(name.split("::")[1], e.time_range.start, e.time_range.end)
              for e in events for name in PHASES if e.name == name]
    counts = {"ops": 0, "all": 0, "syncs": 0, "rnn": 0, "cpu_only": 0, "forward": 0, "backward": 0,
              "optimiser": 0}
    rnn_sequence: set[int] = set()
    for event in events:
        if not event.name.startswith("aten::"):
            continue
        counts["all"] += 1
        top = _top(event)
        if event.name in SYNC_OPS and not top.name.startswith("aten::_fused_"):
            counts["syncs"] += 1
        if top.name in RNN_OPS:
            counts["rnn"] += 1
            counts["cpu_only"] += top is not event
            if event.sequence_nr >= 0:
                rnn_sequence.add(event.sequence_nr)
        elif top is not event and (top.name.startswith(("aten::_foreach_", "aten::_fused_"))
                                   or _in_dropout(event) or _scalar_cast(event)):
            counts["cpu_only"] += 1
        if top is event:
            counts["ops"] += 1
            for phase, start, end in ranges:
                if start <= event.time_range.start <= end:
                    counts[phase] += 1
                    break
    rnn_backward = sum(_below(e) for e in events
                       if e.name.startswith("autograd::engine::evaluate_function") and e.sequence_nr in rnn_sequence)
    counts["rnn"] += rnn_backward
    counts["cpu_only"] += rnn_backward
    return counts


def _in_dropout(event: Any) -> bool:
    """Below ``aten::dropout`` but not its ``native_dropout`` (CUDA's one kernel; the CPU draws and scales in
    several ops)."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name == "aten::dropout":
            return event.name != "aten::native_dropout"
        parent = parent.cpu_parent
    return False


def _scalar_cast(event: Any) -> bool:
    """Part of the CPU's cast of a Python number to an elementwise op's dtype: an ``aten::to`` that makes a copy
    (``_to_copy``) right below another op, and the events below it."""
    node = event
    while node is not None and node.name.startswith("aten::"):
        parent = node.cpu_parent
        if (node.name == "aten::to" and parent is not None and parent.name.startswith("aten::")
                and parent.name != "aten::to" and any(c.name == "aten::_to_copy" for c in node.cpu_children)):
            return True
        node = parent
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", choices=sorted(RECIPES), default=list(RECIPES))
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--route", choices=("cpu", "device", "both"), default="both",
                        help="on a CPU: its own route, the route a CUDA device takes, or both (default); "
                             "with --device cuda the device's own")
    parser.add_argument("--batch-tokens", type=int, default=1024, help="padded tokens per batch (default 1024)")
    parser.add_argument("--sentences", type=int, default=32, help="sentences per batch (default 32)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bucketed", action="store_true",
                        help="sentences of the width or one word less, as the engine's length-bucketed batches "
                             "(default: between half and all of the width, as the figures before were measured)")
    parser.add_argument("--sites", action="store_true",
                        help="after each row, where in the code its host syncs were made (slower: Python stacks)")
    parser.add_argument("--exact", action="store_true",
                        help="the exact loss on every route (default: the engine's step on the route's device: on "
                             "CUDA's route the loss's index made on the CPU, where boolean selection would read "
                             "the host; as the figures before 2026-11-27's GPU check were counted with --exact)")
    parser.add_argument("--unfused-adam", action="store_true",
                        help="count torch's default Adam update (fused_adam: false) instead of the fused one")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's package, run from anywhere

    routes = ["device"] if args.device != "cpu" else ["cpu", "device"] if args.route == "both" else [args.route]
    print(f"{'backend':<13} {'config':<17} {'route':<7} {'ops/step':>9} {'forward':>8} {'backward':>8} "
          f"{'optimiser':>9} {'aten events':>11} {'RNN':>6} {'CPU-only':>8} {'less CPU-only':>13} {'syncs':>6}   "
          f"{'before (ops / events)':>21} {'target (events)':>15}")
    for name in args.models:
        for route in routes:
            row = count_step(name, args.device, args.batch_tokens, args.sentences, args.seed, route,
                             not args.unfused_adam, args.bucketed, args.sites, args.exact)
            before = BEFORE.get(name)
            target = TARGET.get(name)
            print(f"{row['backend']:<13} {row['config']:<17} {route:<7} {row['ops']:>9,} {row['forward']:>8,} "
                  f"{row['backward']:>8,} {row['optimiser']:>9,} {row['all']:>11,} {row['rnn']:>6,} "
                  f"{row['cpu_only']:>8,} {row['all'] - row['cpu_only']:>13,} {row['syncs']:>6,}   "
                  f"{'' if before is None else f'{before[0]:,} / {before[1]:,}':>21} "
                  f"{'' if target is None else f'≤ {target:,}':>15}", flush=True)
            for count, where in row.get("sync_sites", []):
                print(f"    {count:>4} host sync{'s' if count > 1 else ''} at {where}", flush=True)


if __name__ == "__main__":
    main()
