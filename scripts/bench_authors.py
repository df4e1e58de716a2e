"""Training speed and peak memory of depinduce beside the authors' own code, in one run on one machine.

Both implementations are driven through exactly ``scripts/bench_train.py``'s step: the same length-bucketed
batches (same seed, same order), 30% of the real tokens masked, forward, backward, gradient clipping at 0.25 and
Adam (lr 3e-4, eps 1e-9, weight decay 1.2e-6).  depinduce computes its output layer at the masked positions
only (what ``depinduce train`` does); the authors' code computes it where their training script does (their
StructFormer and Probabilistic Transformer at every position, their UDGN at the masked ones).  Each measurement
runs a fixed number of steps in a fresh subprocess, so both see the same batches and each peak resident memory
(``ru_maxrss``) is its own; the two implementations alternate for ``--rounds`` rounds (order swapped every
round) and the median is reported, so a disturbance of the machine hits both.  ``--precision bf16`` runs
depinduce's forward passes under bfloat16 autocast, as ``train.precision: bf16`` does (a numerics switch; the
authors' side stays float32).  ``--device cuda`` runs both sides on the GPU, the authors' in plain float32 (TF32
off in products and in cuDNN's convolutions, as their PyTorch 1.5.1 computed; each side's TF32 modes are in its
figures): the batches are still drawn and masked on the CPU and moved there, the clock stops after the GPU has
finished, and memory is the GPU's peak (``torch.cuda.max_memory_allocated``; the caching allocator's reserved
peak beside it).

The authors' code is imported from a checkout the user gives, never from this repository:

    # StructFormer: google-research/google-research, the folder that holds structformer/
    python scripts/bench_authors.py --model structformer --authors /tmp/google-research --configs small
    # UDGN: yikangshen/UDGN (models.py, layers.py)
    python scripts/bench_authors.py --model udgn --authors /tmp/UDGN --configs small --batch-tokens 2048
    # Probabilistic Transformer: whyNLP/Probabilistic-Transformer (its encoder imports opt_einsum)
    python scripts/bench_authors.py --model probformer --authors /tmp/Probabilistic-Transformer --batch-tokens 2048

Prints one JSON line per configuration: the CPU model and its vector extensions (and the GPU, torch's CUDA version
and its TF32 modes on CUDA), both implementations' tokens/s and peak memory, and the ratios (depinduce /
authors).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_train  # noqa: E402
from bench_train import (  # noqa: E402
    VOCAB_SIZE, bucketed_batches, chosen_configs, depinduce_step_function, device_peak_memory, parse_sets,
    sentence_lengths, synchronize, training_step,
)
from cpu_info import machine_description  # noqa: E402
from depinduce.training.precision import set_float32_products  # noqa: E402

PAD, MASK = 0, 2  # depinduce's special indices (data/vocab.py); the authors' scripts take pad as a parameter

# The networks compared (bench_train's configurations; the authors' constructors take the same shapes).
CONFIGS = {model: bench_train.CONFIGS[model] for model in ("structformer", "udgn", "probformer")}
# Regularisation shared by both sides unless --set changes it (the measurements: no dropout for UDGN).
SHARED_DEFAULTS: dict[str, dict[str, Any]] = {
    "structformer": {"dropout": 0.1, "dropatt": 0.0, "pos_emb": True, "n_parser_layers": 3, "conv_size": 9},
    "udgn": {"dropout": 0.0, "dropatt": 0.0},
    "probformer": {},  # each configuration's own dropout (paper 0.15, cpu 0), on both sides
}

# Sizes the authors' constructors derive from the width instead of taking them: on both sides they follow
# ``hidden_size`` (so that ``--set hidden_size=…`` alone compares networks of one size).
TIED: dict[str, dict[str, tuple[Any, str]]] = {
    "structformer": {"ff_size": (lambda c: 4 * c["hidden_size"],
                                 "the authors' StructFormer makes its feed-forward layers 4 × hidden_size wide")},
    "udgn": {"parser_hidden_size": (lambda c: c["hidden_size"],
                                    "the authors' UDGN makes its parser LSTM as wide as hidden_size (emb_size)")},
}


def shared_config(model: str, name: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """The configuration both sides build: ``name``'s shapes, the shared regularisation, ``overrides`` (``--set``),
    the sizes in ``TIED`` following the width; exits naming the key when an override unties one."""
    shared = {**CONFIGS[model][name], **SHARED_DEFAULTS[model], **overrides}
    for key, (follows, why) in TIED.get(model, {}).items():
        if key not in overrides:
            shared[key] = follows(shared)
        if shared[key] != follows(shared):
            sys.exit(f"--set {key}: {why}; set hidden_size alone")
    return shared


def authors_step_function(model_name: str, config: dict[str, Any], authors: Path,
                          device: str = "cpu") -> tuple[Any, Any]:
    """The authors' model at ``config`` on ``device`` and its training loss as their script computes it (the
    batch is masked on the CPU, as on depinduce's side, and moved to the device)."""
    import torch
    import torch.nn.functional as F

    where = torch.device(device)

    if model_name == "structformer":
        root = authors.parent if (authors / "structformer.py").is_file() else authors
        if not (root / "structformer" / "structformer.py").is_file():
            sys.exit(f"{authors}: no structformer/structformer.py here (give google-research's checkout root)")
        sys.path.insert(0, str(root))
        from structformer import structformer as authors_module  # type: ignore[import-not-found]

        model = authors_module.StructFormer(
            config["hidden_size"], config["n_layers"], VOCAB_SIZE, config["n_heads"], config["dropout"],
            config["dropatt"], False, config["pos_emb"], pad=PAD, n_parser_layers=config["n_parser_layers"],
            conv_size=config["conv_size"], relations=("head", "child"), weight_act="softmax").to(where)

        def loss(tokens: torch.Tensor, mask: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
            data, targets = (t.to(where) for t in mask_like_authors(tokens, mask, generator))
            pos = torch.arange(data.size(1), device=where)[None, :]
            output, _ = model(data, pos)
            return F.cross_entropy(output, targets.reshape(-1), ignore_index=PAD)

        return model, loss
    if model_name == "udgn":
        if not (authors / "models.py").is_file():
            sys.exit(f"{authors}: no models.py here (give the yikangshen/UDGN checkout)")
        sys.path.insert(0, str(authors))
        import models as authors_module  # type: ignore[import-not-found]

        model = authors_module.UDGN(
            emb_size=config["hidden_size"], head_size=config["head_size"], nlayers=config["n_layers"],
            ntokens=VOCAB_SIZE, nhead=config["n_heads"], dropout=config["dropout"],
            parser_dropout=config["dropout"], dropatt=config["dropatt"], pos_emb=False, pad=PAD,
            n_parser_layers=config["parser_layers"]).to(where)

        def loss(tokens: torch.Tensor, mask: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
            data, targets = (t.to(where) for t in mask_like_authors(tokens, mask, generator))
            pos = torch.arange(data.size(1), device=where)[None, :]
            return model(data, targets, pos)[0]

        return model, loss
    if model_name == "probformer":
        if where.type != "cpu":
            sys.exit("the Probabilistic Transformer's authors' side is driven on the CPU only")
        return authors_probformer(config, authors)
    sys.exit(f"no authors' driver for {model_name}")


def authors_probformer(config: dict[str, Any], authors: Path) -> tuple[Any, Any]:
    """The authors' ``HalfLazyHeadProbEncoder`` (their ``crf-mlm-ptb`` configuration's encoder), imported from
    their file alone (their package's ``__init__`` imports every variant), between the parts of their
    ``MaskedLanguageModel`` that flair supplies: a Xavier-uniform embedding, their output ``nn.Linear`` at every
    position, and their ``_calculate_loss`` — per sentence, the token-summed cross-entropy over the masked words,
    divided by the batch's masked count — plus their trainer's ``getTernaryNorm(p=2)`` weighted as depinduce's
    side weights its norm (``ternary_l2``: 5e-4, their ``crf-mlm-ptb`` lambda, unless the configuration sets it).
    flair's per-token Sentence objects are left out: they would only slow the authors' side."""
    import importlib.util

    import torch
    import torch.nn.functional as F
    from torch import nn

    candidates = [authors / "src" / "models" / "modules", authors / "models" / "modules", authors]
    encoder_file = next((c / "lazyHeadCRFEncoder.py" for c in candidates if (c / "lazyHeadCRFEncoder.py").is_file()),
                        None)
    if encoder_file is None:
        sys.exit(f"{authors}: no src/models/modules/lazyHeadCRFEncoder.py here "
                 "(give the whyNLP/Probabilistic-Transformer checkout)")
    try:
        import opt_einsum  # noqa: F401  (the authors' encoder imports it; their requirements.txt)
    except ImportError:
        sys.exit("the authors' encoder imports opt_einsum (their requirements.txt): pip install opt_einsum, or put "
                 "it on PYTHONPATH")
    spec = importlib.util.spec_from_file_location("authors_lazy_head_crf_encoder", encoder_file)
    assert spec is not None and spec.loader is not None
    authors_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(authors_module)
    if config.get("decomposition", "uv") != "uv":
        sys.exit("the authors' side is driven at decomposition uv (their crf-mlm-ptb configuration)")
    from depinduce.models.probformer.config import ProbFormerConfig

    ternary_l2 = config.get("ternary_l2", ProbFormerConfig.ternary_l2)
    dists = ", ".join(str(n) for n in range(2, config["distance_threshold"] + 2))  # offsets 1..t, then beyond t

    class AuthorsMLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(VOCAB_SIZE, config["d"])
            nn.init.xavier_uniform_(self.embedding.weight)
            self.mod = authors_module.HalfLazyHeadProbEncoder(
                d_model=config["d"], n_head=config["n_channels"], n_iter=config["n_iter"], dists=dists,
                async_update=True, use_td=f"uv:{config['rank']}", dropout=config["dropout"])
            self.linear = nn.Linear(config["d"], VOCAB_SIZE)

    model = AuthorsMLM()

    def loss(tokens: torch.Tensor, mask: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        data, targets = mask_like_authors(tokens, mask, generator)
        features = model.linear(model.mod(model.embedding(data), mask.to(torch.int32)))
        targets = targets.masked_fill(targets == PAD, -100)
        score = torch.zeros(())
        for feats, tags, length in zip(features, targets, mask.sum(1).tolist()):
            if (tags == -100).all().item():
                continue
            score = score + F.cross_entropy(feats[:length], tags[:length], ignore_index=-100, reduction="sum")
        score = score / max(1, int((targets != -100).sum()))
        return score + ternary_l2 * model.mod.getTernaryNorm(2)

    return model, loss


def mask_like_authors(tokens: Any, mask: Any, generator: Any) -> tuple[Any, Any]:
    """The authors' ``mask_data``: 30% of the real tokens become <mask>; targets are <pad> elsewhere."""
    import torch

    masked = (torch.rand(tokens.shape, generator=generator) < 0.3) & mask
    return tokens.masked_fill(masked, MASK), tokens.masked_fill(~masked, PAD)


def worker(side: str, model_name: str, config: dict[str, Any], authors: Path | None, threads: int, steps: int,
           batch_tokens: int, seed: int, precision: str = "fp32", device: str = "cpu") -> dict[str, object]:
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    where = torch.device(device)
    if side == "depinduce":
        model, loss_of = depinduce_step_function(model_name, config, precision, device)
    else:
        assert authors is not None
        # Their numerics: plain float32.  torch's default lets cuDNN's convolutions use TF32, which their
        # PyTorch 1.5.1 did not have; the depinduce side at precision fp32 turns it off too.
        set_float32_products("fp32", where)
        model, loss_of = authors_step_function(model_name, config, authors, device)
    batches = bucketed_batches(sentence_lengths(20_000, seed), batch_tokens, seed)
    step = training_step(model, loss_of, seed)
    for lengths in batches[:2]:  # warm-up: allocator, kernels
        step(lengths)
    words = 0
    synchronize(where)
    start = time.perf_counter()
    for lengths in batches[2:2 + steps]:
        words += step(lengths)
    synchronize(where)
    elapsed = time.perf_counter() - start
    return {"tokens_per_s": words / elapsed, "seconds": elapsed, "tokens": words,
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2,
            **device_peak_memory(where),
            **({"tf32_matmul": torch.backends.cuda.matmul.allow_tf32, "tf32_cudnn": torch.backends.cudnn.allow_tf32}
               if where.type == "cuda" else {}),
            "parameters_m": sum(p.numel() for p in model.parameters()) / 1e6}


def worker_command(script: str, args: argparse.Namespace, side: str, config: dict[str, Any]) -> list[str]:
    """The command line that runs one side's worker of ``script`` (this benchmark or ``profile_step.py``, which
    share :func:`add_side_by_side_arguments`)."""
    return [sys.executable, script, "--model", args.model, "--authors", str(args.authors), "--worker", side,
            "--worker-config", json.dumps(config), "--threads", str(args.threads), "--steps", str(args.steps),
            "--batch-tokens", str(args.batch_tokens), "--seed", str(args.seed), "--precision", args.precision]


def run_side(command: list[str], side: str) -> dict[str, Any]:
    """Run a worker in a fresh process; its last line of output is its JSON result."""
    finished = subprocess.run(command, capture_output=True, text=True)
    if finished.returncode != 0:
        sys.exit(f"{side} worker failed (exit {finished.returncode}):\n{finished.stderr[-3000:]}")
    return json.loads(finished.stdout.strip().splitlines()[-1])


def run_worker(args: argparse.Namespace, side: str, config: dict[str, Any]) -> dict[str, Any]:
    return run_side(worker_command(__file__, args, side, config) + ["--device", args.device], side)


def add_side_by_side_arguments(parser: argparse.ArgumentParser, models: list[str], steps: int,
                               steps_help: str) -> None:
    """The options this benchmark and ``profile_step.py`` share: the model and configurations, the authors'
    checkout, both sides' overrides, depinduce's precision, threads, steps, batches, and the worker's own."""
    parser.add_argument("--model", choices=models, default=models[0])
    parser.add_argument("--authors", type=Path, required=True, help="the authors' checkout (see above)")
    parser.add_argument("--configs", nargs="+", help="named configurations (default: all)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a shared configuration key (dropout, dropatt, ...)")
    parser.add_argument("--depinduce-set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a key of depinduce's model_config only (e.g. an implementation switch)")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                        help="depinduce's train.precision (the authors' side is float32 either way)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=steps, help=steps_help)
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker", choices=("depinduce", "authors"), help=argparse.SUPPRESS)
    parser.add_argument("--worker-config", help=argparse.SUPPRESS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_side_by_side_arguments(parser, ["structformer", "udgn", "probformer"], 20,
                               "timed steps per measurement (after 2 warm-up)")
    parser.add_argument("--device", default="cpu",
                        help="cpu or cuda[:N]: both sides on it; on CUDA the memory figures are the GPU's peaks")
    parser.add_argument("--rounds", type=int, default=3, help="alternating measurements of each implementation")
    args = parser.parse_args()

    if args.worker:
        result = worker(args.worker, args.model, json.loads(args.worker_config), args.authors, args.threads,
                        args.steps, args.batch_tokens, args.seed, args.precision, args.device)
        print(json.dumps(result))
        return
    names = chosen_configs(args.model, args.configs)
    shared_overrides = parse_sets(args.set)
    ours_overrides = parse_sets(args.depinduce_set)
    for name in names:
        shared = shared_config(args.model, name, shared_overrides)
        configs = {"depinduce": {**shared, **ours_overrides}, "authors": shared}
        runs: dict[str, list[dict[str, Any]]] = {"depinduce": [], "authors": []}
        for round_index in range(args.rounds):
            order = ("authors", "depinduce") if round_index % 2 == 0 else ("depinduce", "authors")
            for side in order:
                runs[side].append(run_worker(args, side, configs[side]))
                print(f"{name} round {round_index + 1}: {side} "
                      f"{runs[side][-1]['tokens_per_s']:.0f} tokens/s", file=sys.stderr)
        summary: dict[str, Any] = {"model": args.model, "config": name,
                                   **{key: value for key, value in machine_description(args.device).items()
                                      if not key.startswith("tf32")},  # each side's own modes are below
                                   "device": args.device, "threads": args.threads, "batch_tokens": args.batch_tokens,
                                   "steps": args.steps, "rounds": args.rounds,
                                   "shared": shared, "depinduce_overrides": ours_overrides,
                                   "depinduce_precision": args.precision}
        for side, measured in runs.items():
            summary[side] = {
                "tokens_per_s": round(statistics.median(r["tokens_per_s"] for r in measured), 1),
                "tokens_per_s_all": [round(r["tokens_per_s"], 1) for r in measured],
                "peak_rss_gb": round(max(r["peak_rss_gb"] for r in measured), 3),
                **{key: round(max(r[key] for r in measured), 3)
                   for key in ("peak_gpu_gb", "peak_gpu_reserved_gb") if key in measured[0]},
                **{key: measured[0][key] for key in ("tf32_matmul", "tf32_cudnn") if key in measured[0]},
                "parameters_m": round(measured[0]["parameters_m"], 2),
            }
        if summary["depinduce"]["parameters_m"] != summary["authors"]["parameters_m"]:
            print(f"{name}: the two networks differ in size ({summary['depinduce']['parameters_m']} M parameters "
                  f"against {summary['authors']['parameters_m']} M): the ratios compare unlike networks",
                  file=sys.stderr)
        memory = "peak_gpu_gb" if "peak_gpu_gb" in summary["depinduce"] else "peak_rss_gb"
        summary["speed_ratio"] = round(summary["depinduce"]["tokens_per_s"] / summary["authors"]["tokens_per_s"], 2)
        summary["memory_ratio"] = round(summary["depinduce"][memory] / summary["authors"][memory], 2)
        summary["memory_measure"] = memory
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
