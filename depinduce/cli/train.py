"""``depinduce train``: options in, :func:`depinduce.api.train` (the training engine) out.

The same command trains on one process or, launched by ``torchrun --nproc_per_node N -m depinduce train``, with
DDP on N ranks; ``--seeds … --jobs K`` trains K seeds at once in processes of their own.
Errors are :class:`~depinduce.errors.DepinduceError` and become one line on stderr (exit code 2).
"""

from __future__ import annotations

from pathlib import Path

import click

from depinduce.api.training import stop_exit_code, train


def _seed_group(value: str | None) -> list[int] | None:
    try:
        return None if value is None else [int(part) for part in value.split(",")]
    except ValueError:
        raise click.BadParameter(f"{value!r}: comma-separated seeds") from None


@click.command("train")
@click.option("--model", "model", default=None, metavar="NAME",
              help="Registered backend to train (`depinduce models`); may come from the recipe's 'model' key.")
@click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="Data folder made by `depinduce preprocess` (train.txt, vocab.json, dev.* when present). "
                   "Default: data/ptb.")
@click.option("--out", "run_dir", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="Run directory: config.yaml, vocab.json, model.pt, last.pt, metrics.jsonl, manifest.json. "
                   "Default: runs/NAME, or runs/NAME-2, … (an existing folder is never reused).")
@click.option("--recipe", default=None, metavar="FILE|NAME",
              help="YAML recipe (keys model, model_config, train), or the name of a bundled one "
                   "(structformer-ptb-cpu, …). Default: the model's CPU recipe on CPU, its paper recipe on CUDA.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a recipe value, e.g. --set lr=1e-3 --set model_config.n_layers=4. Repeatable.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="CPU threads for torch (per rank).")
@click.option("--seed", type=int, default=None, help="Random seed (default: the recipe's train.seed, else 0).")
@click.option("--seeds", default=None, metavar="K,K,…|A-B|N",
              help="One run per seed in RUN_DIR/seed-K, one after another: a list (0,1,2,3), a range (0-7) or a "
                   "count N (seeds 0..N-1). Each is the run `--seed K --out RUN_DIR/seed-K` makes, so a scheduler may launch "
                   "them instead; `depinduce report RUN_DIR` reads either. Not with --seed.")
@click.option("--jobs", type=click.IntRange(min=1), default=None, metavar="K",
              help="With --seeds: train K seeds at once, each in its own process (each the run `--seed K` makes "
                   "alone). CPU: the cores are divided (--threads, else cores/K each); one GPU: shared; several "
                   "GPUs: one seed per device. Ctrl-C stops them all.")
@click.option("--seed-group", default=None, hidden=True, callback=lambda ctx, param, value: _seed_group(value),
              help="The --seeds list this one-seed run belongs to (what --jobs tells each seed's process).")
@click.option("--resume", is_flag=True,
              help="Continue the run in --out from its last.pt, with the data folder, budgets and seeds it "
                   "recorded (a budget given again replaces the recorded one).")
@click.option("--max-time", type=float, default=None, metavar="MINUTES",
              help="Stop cleanly (evaluated and checkpointed) before this many minutes have passed "
                   "(default: the recipe's train.max_time, e.g. 30 for the CPU recipes).")
@click.option("--max-tokens", default=None, metavar="N",
              help="Stop cleanly (evaluated and checkpointed) once the run has read N training tokens (2500000, "
                   "2.5M, 500k), counted over the whole run, resumes included: the same budget on every machine. "
                   "Default: the recipe's train.max_tokens (none in the shipped recipes).")
@click.option("--init-train", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Refining backends (rngtr): a CoNLL-U parse of the data folder's train.conllu (same sentences, "
                   "same order; e.g. `depinduce parse` output of any model) whose graphs the first pass reads.")
@click.option("--init-dev", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Refining backends: the same for dev.conllu, so dev scores measure refining that parse.")
@click.option("--warm-start", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              metavar="RUN_DIR", help="Start from another run's model.pt (same backend, same data folder), e.g. "
                                      "RNGTr from a trained SynTr.")
@click.option("--encoder-path", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              metavar="DIR", help="RNGTr: initialise the encoder from a local HuggingFace BERT folder (needs the "
                                  "'transformers' package; nothing is downloaded).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar or summaries on stderr.")
@click.option("--force", is_flag=True, help="Start over in an existing run directory (its run files are replaced).")
def train_command(model: str | None, data_dir: Path | None, run_dir: Path | None, recipe: str | None,
                  overrides: tuple[str, ...], device: str, threads: int | None, seed: int | None, seeds: str | None,
                  jobs: int | None, seed_group: str | None, resume: bool, max_time: float | None, max_tokens: str | None,
                  init_train: Path | None, init_dev: Path | None, warm_start: Path | None,
                  encoder_path: Path | None, quiet: bool, force: bool) -> None:
    """Train a neural backend on a preprocessed data folder.  A run stopped on request (Ctrl-C, SIGTERM) is
    checkpointed and exits 130 or 143, as a process killed by that signal would: it did not finish."""
    # the one implementation, shared with the Python API (depinduce.train), which checks the budgets
    runs = train(model, data_dir, run_dir, recipe, settings=overrides, device=device, threads=threads, seed=seed,
          resume=resume, max_time=max_time, max_tokens=max_tokens, init_train=init_train, init_dev=init_dev,
          warm_start=warm_start,
          encoder_path=encoder_path, quiet=quiet, force=force, seeds=seeds, jobs=jobs,
          seed_group=seed_group)
    return stop_exit_code(runs if isinstance(runs, list) else [runs])
