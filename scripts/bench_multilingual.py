"""Unsupervised parsing beyond English: German, French, Chinese and Japanese GSD (prints a table; not a test).

The shared copies of these treebanks have dev and test splits only, so each is preprocessed with
``--train-on dev,test``: the models train on the unlabelled text of dev and test (the transductive setting
papers use) and are scored on the test gold trees; model selection still uses the dev gold trees.  Every step
runs through the CLI in a subprocess, so the figures are what a user of ``depinduce`` gets:

    depinduce preprocess ud --treebank UD/UD_German-GSD --train-on dev,test --out WORK/data/de
    depinduce train --recipe udgn-ud-cpu --data WORK/data/de --out WORK/runs/de-udgn [--max-time M]
    depinduce parse --model WORK/runs/de-udgn --input-format conllu WORK/data/de/test.conllu > pred
    depinduce eval --gold WORK/data/de/test.conllu --pred pred --json

plus left- and right-branching baselines parsed and scored the same way.  The recipes are the CPU ones
(``udgn-ud-cpu``, ``structformer-ptb-cpu``), each with its own time budget unless ``--max-time`` is given; the
full run is 4 languages x 2 models x the budget (30 minutes each by default).

    python scripts/bench_multilingual.py                                   # everything, recipe budgets
    python scripts/bench_multilingual.py --langs zh --max-time 0.2         # a smoke test
    python scripts/bench_multilingual.py --ud /data/ud --threads 4 --work /tmp/bench-ml
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

TREEBANKS = {"de": "UD_German-GSD", "fr": "UD_French-GSD", "zh": "UD_Chinese-GSD", "ja": "UD_Japanese-GSD"}
LANGUAGES = {"de": "German", "fr": "French", "zh": "Chinese", "ja": "Japanese"}
RECIPES = {"udgn": "udgn-ud-cpu", "structformer": "structformer-ptb-cpu"}
BASELINES = ("left-branching", "right-branching")
DEFAULT_UD = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "ud"


def depinduce(*args: str, stdout: Path | None = None) -> str:
    """Run one ``depinduce`` command; its stdout (or the file it went to); a failure stops the benchmark."""
    command = [sys.executable, "-m", "depinduce", *args]
    print("$ depinduce " + " ".join(args) + (f" > {stdout}" if stdout else ""), file=sys.stderr, flush=True)
    if stdout is not None:
        with stdout.open("w", encoding="utf-8") as stream:
            result = subprocess.run(command, stdout=stream, stderr=subprocess.PIPE, text=True)
    else:
        result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): depinduce {' '.join(args)}\n{result.stderr[-2000:]}")
    return result.stdout


def score(model: str, gold: Path, pred: Path) -> tuple[float, float]:
    """DDA and UDA of ``model`` (a run folder or a baseline name) on ``gold``."""
    depinduce("parse", "--model", model, "--input-format", "conllu", "--quiet", str(gold), stdout=pred)
    metrics = json.loads(depinduce("eval", "--gold", str(gold), "--pred", str(pred), "--json"))["metrics"]
    return metrics["dda"], metrics["uda"]


def bench_language(lang: str, args: argparse.Namespace) -> list[tuple[str, str, float, float]]:
    """Preprocess one treebank, train every model, score them and the baselines: rows of the table."""
    treebank = args.ud / TREEBANKS[lang]
    if not treebank.is_dir():
        sys.exit(f"{treebank}: no such folder (give --ud, the folder holding {', '.join(TREEBANKS.values())})")
    data = args.work / "data" / lang
    depinduce("preprocess", "ud", "--treebank", str(treebank), "--train-on", "dev,test", "--out", str(data),
              "--force", "--quiet")
    gold = data / "test.conllu"
    rows = []
    for model in args.models:
        run = args.work / "runs" / f"{lang}-{model}"
        budget = ("--max-time", str(args.max_time)) if args.max_time is not None else ()
        started = time.monotonic()
        depinduce("train", "--recipe", RECIPES[model], "--data", str(data), "--out", str(run), "--force",
                  "--threads", str(args.threads), "--quiet", *budget)
        print(f"{lang} {model}: trained in {(time.monotonic() - started) / 60:.1f} min", file=sys.stderr)
        rows.append((LANGUAGES[lang], model, *score(str(run), gold, args.work / f"{lang}-{model}.pred.conllu")))
    for baseline in BASELINES:
        rows.append((LANGUAGES[lang], baseline, *score(baseline, gold, args.work / f"{lang}-{baseline}.pred.conllu")))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ud", type=Path, default=DEFAULT_UD,
                        help=f"folder of the UD treebanks (default {DEFAULT_UD})")
    parser.add_argument("--langs", default=",".join(TREEBANKS), help="comma-separated subset of de,fr,zh,ja")
    parser.add_argument("--models", default=",".join(RECIPES), help="comma-separated subset of udgn,structformer")
    parser.add_argument("--max-time", type=float, default=None,
                        help="minutes per training run, passed to train --max-time (default: the recipe's)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads per training run")
    parser.add_argument("--work", type=Path, default=Path("bench-multilingual"),
                        help="folder for data, runs and parses (default ./bench-multilingual)")
    args = parser.parse_args()
    langs = [x.strip() for x in args.langs.split(",") if x.strip()]
    args.models = [x.strip() for x in args.models.split(",") if x.strip()]
    for name, given, known in (("--langs", langs, TREEBANKS), ("--models", args.models, RECIPES)):
        unknown = [x for x in given if x not in known]
        if unknown or not given:
            parser.error(f"{name}: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(known)}")
    args.work.mkdir(parents=True, exist_ok=True)
    rows = [row for lang in langs for row in bench_language(lang, args)]
    budget = f"{args.max_time:g} min" if args.max_time is not None else "recipe budget"
    print(f"Test split, punctuation removed (UD PUNCT); models trained on the text of dev+test ({budget}, "
          f"{args.threads} thread{'' if args.threads == 1 else 's'}).\n")
    print("| language | model | DDA | UDA |")
    print("|---|---|---:|---:|")
    for language, model, dda, uda in rows:
        print(f"| {language} | {model} | {dda:.1f} | {uda:.1f} |")
    print("\nTransductive: trained on the unlabelled text of dev and test (--train-on dev,test); "
          "model selection by dev UDA against the dev gold trees.")


if __name__ == "__main__":
    main()
