#!/usr/bin/env bash
# GPU figures in one go (≤ 8 minutes on an H100/H200), printed as one table: the StructFormer and UDGN paper
# networks trained alone, then 4 seeds at once on the same GPU (`train --seeds 0-3 --jobs 4`), in training
# tokens/s (each run's tokens read / its seconds in training steps, from metrics.jsonl) and their sum.
#
#   bash scripts/gpu_check.sh            # from the repository root, on the machine with the GPU
#
# Nothing is fetched from the network: the package is installed with `pip install --no-deps -e .` against the
# torch already there; the text is NLTK's Brown corpus when NLTK_DATA (or ./shared or ../shared/nltk_data) has it,
# else a generated corpus of the same size.  Knobs (environment): GPU_CHECK_TOKENS (per run, default 2M),
# GPU_CHECK_JOBS (default 4), GPU_CHECK_MODELS (default "structformer udgn"), GPU_CHECK_DEVICE (default cuda),
# GPU_CHECK_MINUTES (each run's --max-time, default 0.75), GPU_CHECK_LIMIT (hard limit in seconds per training
# command, default 100: 4 commands stay under 8 minutes with the set-up), GPU_CHECK_INSTALL=0 (already installed).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
TOKENS="${GPU_CHECK_TOKENS:-2M}"
JOBS="${GPU_CHECK_JOBS:-4}"
MODELS="${GPU_CHECK_MODELS:-structformer udgn}"
DEVICE="${GPU_CHECK_DEVICE:-cuda}"
MINUTES="${GPU_CHECK_MINUTES:-0.75}"
LIMIT="${GPU_CHECK_LIMIT:-100}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

for dir in "${NLTK_DATA:-}" shared/nltk_data ../shared/nltk_data; do
  if [ -n "$dir" ] && [ -e "$dir/corpora/brown.zip" -o -d "$dir/corpora/brown" ]; then
    NLTK_DATA="$(cd "$dir" && pwd)"
    export NLTK_DATA
    break
  fi
done

if [ "${GPU_CHECK_INSTALL:-1}" != 0 ]; then  # offline: no index, no isolated build environment to fetch
  "$PY" -m pip install --no-deps --no-build-isolation --no-index -q -e . >"$WORK/pip.log" 2>&1 || {
    echo "pip install --no-deps -e . failed:" >&2; tail -5 "$WORK/pip.log" >&2; exit 1; }
fi
"$PY" - "$DEVICE" <<'PY'
import sys, torch
if sys.argv[1].startswith("cuda") and not torch.cuda.is_available():
    sys.exit("gpu_check: this torch sees no CUDA device")
name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
print(f"torch {torch.__version__}, device {name}", file=sys.stderr)
PY

# the text: Brown (57k sentences) through `preprocess text`, or a generated corpus of the same size
if [ -n "${NLTK_DATA:-}" ]; then
  SOURCE="NLTK Brown"
  "$PY" -m depinduce preprocess text --nltk-corpus brown --out "$WORK/data" --quiet
else
  SOURCE="generated text"
  "$PY" - "$WORK/text.txt" <<'PY'
import random, sys
rng = random.Random(0)
words = [f"w{i}" for i in range(8000)]
weights = [1 / (rank + 1) for rank in range(len(words))]  # Zipf, as in text
with open(sys.argv[1], "w") as out:
    for _ in range(57000):
        out.write(" ".join(rng.choices(words, weights, k=rng.randint(5, 35))) + "\n")
PY
  "$PY" -m depinduce preprocess text --one-per-line "$WORK/text.txt" --out "$WORK/data" --quiet
fi

train() {  # MODEL OUT ARGS…: one training command, bounded in time; its stderr kept for the table's notes
  local model="$1" out="$2"; shift 2
  timeout "$LIMIT" "$PY" -m depinduce train --recipe "$model-ptb" --data "$WORK/data" --device "$DEVICE" \
    --max-tokens "$TOKENS" --max-time "$MINUTES" --out "$out" --quiet "$@" >"$out.log" 2>&1 || echo "$out: exit code $?" >>"$WORK/failed"
}
for model in $MODELS; do
  echo "== $model: alone, then $JOBS at once" >&2
  train "$model" "$WORK/$model-alone" --seed 0
  train "$model" "$WORK/$model-jobs" --seeds "0-$((JOBS - 1))" --jobs "$JOBS"
done

"$PY" - "$WORK" "$JOBS" "$SOURCE" $MODELS <<'PY'
import json, sys
from pathlib import Path

work, jobs, source, models = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]

def speed(run: Path) -> float | None:
    try:
        record = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
        return record["tokens_seen"] / record["train_s"]
    except (OSError, IndexError, KeyError, ValueError, ZeroDivisionError):
        return None

print(f"| model (paper recipe), {source} | runs at once | tokens/s per run | together | vs one alone |")
print("|---|--:|--:|--:|--:|")
for model in models:
    alone = speed(work / f"{model}-alone")
    each = [speed(work / f"{model}-jobs" / f"seed-{s}") for s in range(jobs)]
    got = [s for s in each if s is not None]
    fmt = lambda v: "–" if v is None else f"{v:,.0f}"
    print(f"| {model} | 1 | {fmt(alone)} | {fmt(alone)} | 1.00× |")
    together = sum(got) if len(got) == jobs else None
    ratio = f"{together / alone:.2f}×" if together and alone else "–"
    print(f"| {model} | {jobs} | {' / '.join(fmt(s) for s in each)} | {fmt(together)} | {ratio} |")
failed = work / "failed"
if failed.is_file():
    for line in failed.read_text().splitlines():
        log = Path(line.split(":")[0] + ".log")
        tail = log.read_text().strip().splitlines()[-1:] if log.is_file() else []
        print(f"failed: {line} {tail[0] if tail else ''}")
PY
