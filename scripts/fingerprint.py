"""A fingerprint of what depinduce's command line prints and trains, to prove a refactor changed nothing.

Issue 47's acceptance: CLI output byte-identical on the PTB sample's test split for every backend, training losses
bit-identical over 20 steps.  Everything here goes through ``python -m depinduce ...`` only (the command line is
what stays stable across a redesign), in subprocesses run in a fresh temporary folder with relative paths, one
torch thread (``OMP_NUM_THREADS=1``) and this checkout first on ``PYTHONPATH``:

1. ``preprocess ptb`` (NLTK's sample, ``NLTK_DATA``) and, for RNGTr, ``preprocess ud`` of the first 1,000 training
   and 60 dev sentences of UD English EWT (``data/ud`` in ``../shared``, else beside ``$NLTK_DATA``): the sha256
   of every file written.
2. Each trainable backend's tiny test model (the network sizes its own tests use) is trained with its CPU recipe,
   seed 0, ``log_every`` 1 and no time budget, for exactly 20 optimiser steps: one epoch over the first N training
   sentences, N chosen so that the batching rule documented by ``train``'s batch_tokens (greedy length buckets,
   each at most batch_tokens padded tokens, under the epoch's curriculum cap) makes 20 batches; the DMV runs 20
   EM iterations (``tolerance`` 0, so it never stops as converged).  Dev is cut to 40 sentences.  Recorded: every
   metrics.jsonl record (exact floats) without its timing fields, the per-step losses, config.yaml and stderr.
3. Every model (the three baselines, the bundled ``default`` model, each trained run) parses the first 200
   sentences of the test split (the whole split takes minutes for the bigger models) as CoNLL-U input in each
   output format: conllu, conllx, brackets, conllu with ``--probs``, jsonl with ``--probs``; also conllu from the
   raw text (the ``# text`` lines); and CoNLL-U with every decoder of the models that score heads (mst, eisner,
   argmax and the authors' decoders), ``--channel 1`` (ProbFormer), ``--iterations 1`` (RNGTr), ``--seed 1``
   (random).  A format or option a backend refuses is recorded as its exit code and one-line message.  Each
   output is scored with ``eval`` (the table and ``--json``; ``--json`` only for the decoders and options).
   Recorded: the sha256 of every stdout, the eval texts, and stderr (run names as given: no temporary path).
4. ``depinduce models``: its table.

    python scripts/fingerprint.py --save before.json              # on the original checkout
    python scripts/fingerprint.py --compare before.json           # after the refactor: exit 1 on any difference
    python scripts/fingerprint.py --compare before.json --only dmv,left-branching --keep

About 6 minutes of CPU time (mostly Python and torch start-ups of ~220 commands), spread over ``--jobs``
(default 2) backends at once, so about 3-4 minutes on 2 idle cores; 12-17 minutes were measured on 2 cores that
other jobs kept busy (load average 6-9).  The fingerprint does not depend on --jobs.  The temporary folder's path
is replaced by ``<WORK>`` before hashing (its name always has the same length, so tables are laid out the same).
Entry points come from the installed distribution: reinstall (``pip install -e .``) if the refactor moves a
backend's class.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def shared_folder() -> Path:
    """The read-only shared data: ../shared beside the checkout, else the folder above $NLTK_DATA."""
    beside = REPO.parent / "shared"
    if beside.is_dir() or "NLTK_DATA" not in os.environ:
        return beside
    return Path(os.environ["NLTK_DATA"]).resolve().parent


SHARED = shared_folder()
STEPS = 20  # optimiser steps (EM iterations for the DMV) per training run
TEST_SENTENCES = 200
DEV_SENTENCES = 40
EWT_SENTENCES = {"train": 1000, "dev": 60}
UNTRAINED = ("left-branching", "right-branching", "random", "default")  # parsed as they are: baselines, bundled
# name, parse options, gold file for eval (None: not scored)
FORMATS: tuple[tuple[str, tuple[str, ...], str | None], ...] = (
    ("conllu", (), "test.conllu"),
    ("conllx", ("--format", "conllx"), "test.conllu"),
    ("brackets", ("--format", "brackets"), "test.trees"),
    ("conllu-probs", ("--probs",), "test.conllu"),
    ("jsonl-probs", ("--format", "jsonl", "--probs"), None),
)


@dataclass
class Spec:
    """One trainable backend's tiny run: recipe, network sizes, training settings and the data it reads."""

    recipe: str
    model_config: dict[str, Any]
    train: dict[str, Any]
    data: str = "ptb"  # "ptb" (train.txt rows) or "ewt" (train.conllu tokens, for the supervised RNGTr)
    sliced: bool = True  # cut the training set to exactly STEPS batches (False: EM iterations count the steps)


MLM_TRAIN = {"epochs": 1, "batch_tokens": 100, "curriculum_start": 10, "curriculum_step": 10, "max_length": 40,
             "eval_every": 10}
TRAINED: dict[str, Spec] = {
    "structformer": Spec("structformer-ptb-cpu", {"hidden_size": 16, "n_layers": 2, "n_heads": 4, "ff_size": 32,
                                                  "conv_size": 3, "max_positions": 256}, MLM_TRAIN),
    "udgn": Spec("udgn-ptb-cpu", {"hidden_size": 16, "n_layers": 2, "n_heads": 4, "head_size": 6,
                                  "parser_layers": 2, "parser_hidden_size": 8}, MLM_TRAIN),
    "prpn": Spec("prpn-ptb-cpu", {"emb_size": 12, "hidden_size": 16, "n_layers": 2, "n_slots": 4, "lookback": 2},
                 {"epochs": 1, "batch_tokens": 200, "curriculum_start": None, "max_length": 40, "eval_every": 10}),
    "probformer": Spec("probformer-ptb-cpu", {"d": 8, "n_channels": 3, "n_iter": 2, "rank": 4,
                                              "distance_threshold": 1}, MLM_TRAIN),
    "cpcfg": Spec("cpcfg-ptb-cpu", {"nt": 4, "t": 6, "state_dim": 16, "z_dim": 4, "word_dim": 16, "lstm_dim": 16},
                  {"epochs": 1, "batch_tokens": 100, "curriculum_start": 12, "curriculum_step": 4, "max_length": 40,
                   "eval_every": 10}),
    "dmv": Spec("dmv-ptb-cpu", {"tolerance": 0}, {"epochs": STEPS, "eval_every": 5, "max_length": 10},
                sliced=False),
    "rngtr": Spec("rngtr-ud-cpu", {"hidden_size": 32, "n_layers": 2, "n_heads": 4, "ff_size": 64,
                                   "arc_mlp_size": 32, "label_mlp_size": 16, "dropout": 0.0, "mlp_dropout": 0.0,
                                   "iterations": 2},
                  {"epochs": 1, "batch_tokens": 300, "lr": 1e-2, "warmup_steps": 10, "max_length": 100,
                   "curriculum_start": None},
                  data="ewt"),
}
ALL = (*UNTRAINED, *TRAINED)
SHARED_DECODERS = ("mst", "eisner", "argmax")
# More parses (CoNLL-U, scored with eval --json): every decoder of the models that score heads (`depinduce
# models`: the shared ones and the authors'), and a few backend-specific options.
VARIANTS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    **{name: tuple((f"decoder-{d}", ("--decoder", d)) for d in (*SHARED_DECODERS, *own))
       for name, own in (("structformer", ("structformer-argmax",)), ("udgn", ("udgn-tree", "udgn-argmax")),
                         ("default", ("udgn-tree", "udgn-argmax")), ("rngtr", ("rngtr-mst",)),
                         ("probformer", ("probformer-argmax", "probformer-nonprojective", "probformer-projective")),
                         ("dmv", ("dmv-viterbi",)))},
    "random": (("seed-1", ("--seed", "1")),),
}
VARIANTS["probformer"] += (("channel-1", ("--channel", "1")),)
VARIANTS["rngtr"] += (("iterations-1", ("--iterations", "1")),)


# ------------------------------------------------------------------------------------------------ plumbing


class Fingerprinter:
    """Runs the commands in one work folder and collects the items (name -> JSON value)."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.items: dict[str, Any] = {}
        self.commands: dict[str, str] = {}
        self.started = time.monotonic()
        self.env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0", COLUMNS="120",
                        CUDA_VISIBLE_DEVICES="",
                        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
        self.env.setdefault("NLTK_DATA", str(SHARED / "nltk_data"))

    def log(self, message: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f} s] {message}", file=sys.stderr, flush=True)

    def normalise(self, text: str) -> str:
        """The work folder's path (as given and resolved) replaced, so two runs in different folders agree."""
        for path in {str(self.work.resolve()), str(self.work)}:
            text = text.replace(path, "<WORK>")
        return text

    def depinduce(self, item: str, *args: str, stdout: Path | None = None) -> subprocess.CompletedProcess[bytes]:
        """``python -m depinduce ARGS`` in the work folder; exit code and normalised stderr become items."""
        self.commands[item] = "depinduce " + " ".join(args)
        result = subprocess.run([sys.executable, "-m", "depinduce", *args], cwd=self.work, env=self.env,
                                capture_output=True)
        if stdout is not None:
            (self.work / stdout).write_bytes(result.stdout)
        self.items[f"{item}/exit"] = result.returncode
        self.items[f"{item}/stderr"] = self.normalise(result.stderr.decode("utf-8", "replace"))
        if result.returncode != 0:
            self.log(f"  {item}: exit {result.returncode}: {result.stderr.decode(errors='replace').strip()[-300:]}")
        return result

    def digest(self, data: bytes) -> str:
        return hashlib.sha256(self.normalise(data.decode("utf-8", "surrogateescape")).encode(
            "utf-8", "surrogateescape")).hexdigest()

    def files(self, item: str, folder: Path) -> None:
        for path in sorted((self.work / folder).iterdir()):
            self.items[f"{item}/{path.name}"] = self.digest(path.read_bytes())


def blocks(text: str) -> list[str]:
    """CoNLL-U sentence blocks (without their blank separator line)."""
    return [b.strip("\n") for b in text.split("\n\n") if b.strip()]


def head_file(source: Path, target: Path, n: int | None) -> None:
    """The first ``n`` sentences of a data file (lines, or blocks for CoNLL-U); None: all of it."""
    text = source.read_text(encoding="utf-8")
    if source.suffix == ".conllu":
        target.write_text("".join(b + "\n\n" for b in blocks(text)[:n]), encoding="utf-8")
    else:
        target.write_text("".join(line + "\n" for line in text.splitlines()[:n]), encoding="utf-8")


def batch_count(lengths: list[int], batch_tokens: int, cap: int | None) -> int:
    """Batches of one epoch by ``train``'s documented rule: sentences of 1..cap words sorted by length, greedily
    packed while len(batch) x longest <= batch_tokens (a longer sentence alone)."""
    count, size, longest = 0, 0, 0
    for n in sorted(n for n in lengths if n > 0 and (cap is None or n <= cap)):
        if size and (size + 1) * max(longest, n) > batch_tokens:
            count, size, longest = count + 1, 0, 0
        size, longest = size + 1, max(longest, n)
    return count + (1 if size else 0)


def slice_size(lengths: list[int], spec: Spec) -> int:
    """The fewest leading training sentences whose first epoch is exactly STEPS batches."""
    start, cap = spec.train.get("curriculum_start"), spec.train.get("max_length")
    if start is not None:  # the first epoch's curriculum cap
        cap = start if cap is None else min(start, cap)
    for n in range(1, len(lengths) + 1):
        if batch_count(lengths[:n], spec.train["batch_tokens"], cap) == STEPS:
            return n
    raise SystemExit(f"fingerprint: no prefix of the training set makes {STEPS} batches for {spec.recipe}")


def settings(spec: Spec) -> list[str]:
    items = [f"model_config.{k}={v}" for k, v in spec.model_config.items()]
    items += [f"train.{k}={'null' if v is None else v}" for k, v in spec.train.items()]
    items += ["train.log_every=1", "train.max_time=null"]
    return [arg for item in items for arg in ("--set", item)]


# ------------------------------------------------------------------------------------------------ stages


def prepare(fp: Fingerprinter, names: list[str]) -> None:
    fp.items["cli/models/stdout"] = fp.depinduce("cli/models", "models").stdout.decode("utf-8", "replace")
    fp.log("preprocess ptb")
    fp.depinduce("preprocess/ptb", "preprocess", "ptb", "--quiet", "--out", "ptb")
    fp.files("preprocess/ptb/files", Path("ptb"))
    head_file(fp.work / "ptb" / "test.conllu", fp.work / "test.conllu", TEST_SENTENCES)
    head_file(fp.work / "ptb" / "test.trees", fp.work / "test.trees", TEST_SENTENCES)
    raw = [line[len("# text = "):] for line in (fp.work / "test.conllu").read_text().splitlines()
           if line.startswith("# text = ")]
    (fp.work / "test.raw.txt").write_text("".join(line + "\n" for line in raw), encoding="utf-8")
    if any(TRAINED[n].data == "ewt" for n in names if n in TRAINED):
        fp.log("preprocess ud (UD English EWT, a slice)")
        source = SHARED / "data" / "ud" / "UD_English-EWT"
        if not source.is_dir():
            raise SystemExit(f"fingerprint: RNGTr trains on UD English EWT, which is not in {source}")
        (fp.work / "ewt-src").mkdir()
        for split, n in EWT_SENTENCES.items():
            name = f"en_ewt-ud-{split}.conllu"
            head_file(source / name, fp.work / "ewt-src" / name, n)
        fp.depinduce("preprocess/ewt", "preprocess", "ud", "--quiet", "--treebank", "ewt-src", "--out", "ewt")
        fp.files("preprocess/ewt/files", Path("ewt"))


def make_data(fp: Fingerprinter, name: str, spec: Spec) -> Path:
    """The backend's data folder: the prepared one with training cut to STEPS batches and dev to 40 sentences."""
    source, target = fp.work / spec.data, fp.work / f"data-{name}"
    target.mkdir()
    if not spec.sliced:
        n = None
    elif spec.data == "ewt":
        text = (source / "train.conllu").read_text(encoding="utf-8")
        lengths = [sum(1 for line in b.splitlines() if line.split("\t", 1)[0].isdigit()) for b in blocks(text)]
        n = slice_size(lengths, spec)
    else:
        lengths = [len(line.split()) for line in (source / "train.txt").read_text().splitlines()]  # blank: 0
        n = slice_size(lengths, spec)
    for path in sorted(source.iterdir()):
        if path.name in ("vocab.json", "manifest.json"):
            shutil.copy(path, target / path.name)
        elif path.name.startswith("train."):
            head_file(path, target / path.name, n)
        elif path.name.startswith("dev."):
            head_file(path, target / path.name, DEV_SENTENCES)
    fp.items[f"{name}/train/sentences"] = n
    return target


def train(fp: Fingerprinter, name: str, spec: Spec) -> str | None:
    """Train the tiny run; returns its run folder (relative), or None when training failed."""
    data = make_data(fp, name, spec)
    fp.log(f"train {name} ({STEPS} steps, {fp.items[f'{name}/train/sentences'] or 'all'} training sentences)")
    run = f"run-{name}"
    result = fp.depinduce(f"{name}/train", "train", "--recipe", spec.recipe, "--data", data.name, "--out", run,
                          "--device", "cpu", "--threads", "1", "--seed", "0", "--quiet", *settings(spec))
    metrics = fp.work / run / "metrics.jsonl"
    if result.returncode != 0 or not metrics.is_file():
        return None
    records = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    # timing fields dropped: train_s, wall_s, eval_s, iteration_s, tokens_per_s (seconds, or per second)
    kept = [{k: v for k, v in r.items() if not k.endswith("_s")} for r in records]
    logged = [r for r in records if r.get("train_log")] if spec.sliced else records  # EM: one record an iteration
    losses, steps = [r["train_loss"] for r in logged], [r["step"] for r in logged]
    if steps != list(range(1, STEPS + 1)):
        fp.log(f"  {name}: WARNING: the run logged steps {steps}, not 1..{STEPS}")
    fp.items[f"{name}/train/losses"] = losses
    fp.items[f"{name}/train/metrics"] = kept
    config = fp.work / run / "config.yaml"
    fp.items[f"{name}/train/config.yaml"] = fp.normalise(config.read_text()) if config.is_file() else None
    return run


def parse_and_eval(fp: Fingerprinter, name: str, model: str) -> None:
    fp.log(f"parse {name}")
    for fmt, options, gold in FORMATS:
        item, out = f"{name}/parse/{fmt}", Path(f"{name}.{fmt}.out")
        result = fp.depinduce(item, "parse", "--model", model, "--input-format", "conllu", "--quiet", *options,
                              "test.conllu", stdout=out)
        fp.items[f"{item}/stdout"] = fp.digest(result.stdout)
        if result.returncode != 0 or gold is None:
            continue
        for kind, flags in (("eval", ()), ("eval-json", ("--json",))):
            scored = fp.depinduce(f"{item}/{kind}", "eval", "--gold", gold, "--pred", str(out), *flags)
            fp.items[f"{item}/{kind}/stdout"] = fp.normalise(scored.stdout.decode("utf-8", "replace"))
    result = fp.depinduce(f"{name}/parse/text-conllu", "parse", "--model", model, "--quiet", "test.raw.txt")
    fp.items[f"{name}/parse/text-conllu/stdout"] = fp.digest(result.stdout)
    for label, options in VARIANTS.get(name, ()):
        item, out = f"{name}/parse/{label}", Path(f"{name}.{label}.out")
        result = fp.depinduce(item, "parse", "--model", model, "--input-format", "conllu", "--quiet", *options,
                              "test.conllu", stdout=out)
        fp.items[f"{item}/stdout"] = fp.digest(result.stdout)
        if result.returncode == 0:
            scored = fp.depinduce(f"{item}/eval-json", "eval", "--gold", "test.conllu", "--pred", str(out), "--json")
            fp.items[f"{item}/eval-json/stdout"] = fp.normalise(scored.stdout.decode("utf-8", "replace"))


def backend(fp: Fingerprinter, name: str) -> None:
    """One backend's items: its training run (trainable backends) and its parses."""
    if name not in TRAINED:
        parse_and_eval(fp, name, name)
        return
    run = train(fp, name, TRAINED[name])
    if run is not None:
        parse_and_eval(fp, name, run)


def fingerprint(work: Path, names: list[str], jobs: int) -> dict[str, Any]:
    fp = Fingerprinter(work)
    prepare(fp, names)
    slow_first = sorted(names, key=lambda n: n not in ("default", "cpcfg", "rngtr"))  # the longest ones start first
    with ThreadPoolExecutor(max_workers=jobs) as pool:  # each backend's commands are independent subprocesses
        for future in [pool.submit(backend, fp, name) for name in slow_first]:
            future.result()
    fp.items = dict(sorted(fp.items.items()))
    seconds = time.monotonic() - fp.started
    fp.log(f"done: {len(fp.items)} items in {seconds:.0f} s")
    return {"format": "depinduce-fingerprint/1", "backends": names, "checkout": str(REPO),
            "seconds": round(seconds, 1), "commands": fp.commands, "items": fp.items}


# ------------------------------------------------------------------------------------------------ compare


def difference_hint(old: Any, new: Any) -> str:
    """Where two differing values first part (a list's index), for the table."""
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return f"{len(old)} vs {len(new)} entries"
        first = next(i for i, (a, b) in enumerate(zip(old, new)) if a != b)
        return f"first at entry {first}: {json.dumps(old[first])[:60]} vs {json.dumps(new[first])[:60]}"
    if isinstance(old, str) and isinstance(new, str) and "\n" in old + new:
        a, b = old.splitlines(), new.splitlines()
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        return f"first at line {first + 1}"
    return f"{json.dumps(old)[:40]} vs {json.dumps(new)[:40]}"


def compare(saved: dict[str, Any], current: dict[str, Any], names: list[str], write: Callable[[str], None]) -> int:
    """The table (item, same/DIFFERENT); the number of differences.  Items of backends not run are skipped."""
    ewt = any(TRAINED[n].data == "ewt" for n in names if n in TRAINED)

    def wanted(key: str) -> bool:
        group = key.split("/", 1)[0]
        always = key.startswith(("cli/", "preprocess/ptb"))
        return always or (ewt and key.startswith("preprocess/ewt")) or group in names

    old = {k: v for k, v in saved["items"].items() if wanted(k)}
    new = current["items"]
    width = max(len(k) for k in (*old, *new))
    differences = 0
    for key in sorted(set(old) | set(new)):
        if key not in old:
            status, hint = "DIFFERENT", "not in the saved fingerprint"
        elif key not in new:
            status, hint = "DIFFERENT", "missing now"
        elif old[key] == new[key]:
            status, hint = "same", ""
        else:
            status, hint = "DIFFERENT", difference_hint(old[key], new[key])
        differences += status != "same"
        write(f"{key:<{width}}  {status:<9}  {hint}".rstrip())
    write(f"{len(set(old) | set(new))} items: " + ("all same" if not differences else f"{differences} DIFFERENT"))
    return differences


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--save", metavar="FILE", type=Path, help="write the fingerprint as JSON")
    parser.add_argument("--compare", metavar="FILE", type=Path,
                        help="compare with a saved fingerprint; exit 1 on any difference")
    parser.add_argument("--only", metavar="NAME[,NAME]", action="append", default=[],
                        help=f"only these backends (repeatable or comma-separated): {', '.join(ALL)}")
    parser.add_argument("--jobs", type=int, default=2, metavar="N",
                        help="backends processed at once, one single-threaded command each (default 2; the "
                             "fingerprint does not depend on it)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (its path goes to stderr)")
    args = parser.parse_args()
    names = [n for value in args.only for n in value.split(",") if n] or list(ALL)
    unknown = sorted(set(names) - set(ALL))
    if unknown:
        parser.error(f"--only: unknown backend(s) {', '.join(unknown)}; choose from {', '.join(ALL)}")
    if args.save is None and args.compare is None:
        parser.error("give --save FILE, --compare FILE or both")
    saved = json.loads(args.compare.read_text()) if args.compare is not None else None
    work = Path(tempfile.mkdtemp(prefix="depinduce-fp-"))  # same name length every time: same table layout
    try:
        current = fingerprint(work, names, max(1, args.jobs))
    finally:
        if args.keep:
            print(f"work folder kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    if args.save is not None:
        args.save.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    if saved is not None and compare(saved, current, names, print):
        sys.exit(1)


if __name__ == "__main__":
    main()
