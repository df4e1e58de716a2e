"""README's line 2 as a user runs it, against right-branching: ``depinduce preprocess ptb`` and ``depinduce train
--model MODEL`` verbatim in an empty folder, then the run and right-branching scored on the test split.

Prints one markdown row per run: the training tokens, the wall time (and the estimate the run said at its
start), the selected model's dev figures beside right-branching's, and test DDA / UDA / UF1 beside
right-branching's.  ``--load N`` keeps N busy processes beside the training run (a busy machine): the budget is
counted in training tokens, so the figures must not move, only the time.  Needs NLTK's treebank sample
(``NLTK_DATA`` or ``python -m nltk.downloader treebank brown``).

    python scripts/line_two.py --model structformer --model udgn
    python scripts/line_two.py --model structformer --load 2
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def depinduce(args: list[str], cwd: Path, stdout: Path | None = None) -> str:
    """Run ``depinduce ARGS`` in ``cwd`` (stdout to a file when given); returns stderr; stops on a failure."""
    with open(stdout if stdout else os.devnull, "w", encoding="utf-8") as out:
        result = subprocess.run([sys.executable, "-m", "depinduce", *args], cwd=cwd, stdout=out,
                                stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        sys.exit(f"depinduce {' '.join(args)} failed:\n{result.stderr}")
    return result.stderr


def test_scores(cwd: Path, model: str) -> tuple[float, float, float]:
    """Test DDA, UDA (the papers' protocol) and sentence UF1 of ``model`` (a run folder or a baseline)."""
    pred, trees = cwd / f"{Path(model).name}.test.conllu", cwd / f"{Path(model).name}.test.trees"
    depinduce(["parse", "--quiet", "--model", model, "--input-format", "conllu", "data/ptb/test.conllu"], cwd, pred)
    depinduce(["parse", "--quiet", "--model", model, "--input-format", "conllu", "--format", "brackets",
               "data/ptb/test.conllu"], cwd, trees)
    dep = json.loads(subprocess.run([sys.executable, "-m", "depinduce", "eval", "--json", "--gold",
                                     "data/ptb/test.conllu", "--pred", str(pred)], cwd=cwd, capture_output=True,
                                    text=True, check=True).stdout)["dependency"]
    con = json.loads(subprocess.run([sys.executable, "-m", "depinduce", "eval", "--json", "--gold",
                                     "data/ptb/test.trees", "--pred", str(trees)], cwd=cwd, capture_output=True,
                                    text=True, check=True).stdout)["constituency"]
    return dep["dda"]["percent"], dep["uda"]["percent"], con["uf1_sentence"]["percent"]


def busy() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help="backend(s) to train (default: structformer)")
    parser.add_argument("--load", type=int, default=0, help="busy processes beside the training run")
    parser.add_argument("--keep", type=Path, help="work in this folder (kept) instead of a temporary one")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="line-two-"))
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "data" / "ptb").is_dir():
        depinduce(["preprocess", "ptb"], work)
    rb = test_scores(work, "right-branching")
    print(f"folder {work}; load: {args.load} busy process(es)")
    print("| command | tokens | wall (estimated) | dev DDA / UDA / UF1 (right-branching) | test DDA / UDA / UF1 "
          "| right-branching test |")
    print("|---|--:|--:|---|---|---|")
    for model in args.model or ["structformer"]:
        burners = [multiprocessing.Process(target=busy, daemon=True) for _ in range(args.load)]
        for burner in burners:
            burner.start()
        started = time.monotonic()
        try:
            said = depinduce(["train", "--model", model], work)
        finally:
            for burner in burners:
                burner.terminate()
        minutes = (time.monotonic() - started) / 60
        run = re.search(r"run directory (\S+)", said)[1].rstrip(",")
        estimate = re.search(r"estimate: about (\d+ \w+)", said)
        dev = said.strip().splitlines()[-1]
        figures = re.findall(r"(DDA|UDA|UF1) ([\d.]+)", dev)
        ours = " / ".join(v for _, v in figures[:3])
        base = " / ".join(v for _, v in figures[3:6])
        records = [json.loads(line) for line in (work / run / "metrics.jsonl").read_text().splitlines()]
        tokens = max(record.get("tokens_seen", 0) for record in records)
        test = test_scores(work, run)
        print(f"| `depinduce train --model {model}` | {tokens / 1e6:.2f} M | {minutes:.1f} min "
              f"({estimate[1] if estimate else '?'}) | {ours} ({base}) | "
              + " / ".join(f"{v:.1f}" for v in test) + " | " + " / ".join(f"{v:.1f}" for v in rb) + " |")


if __name__ == "__main__":
    main()
