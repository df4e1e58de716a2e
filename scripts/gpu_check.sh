#!/usr/bin/env bash
# GPU figures in one go (≤ 8 minutes on an H100/H200 with the defaults), printed as ONE table: ops per step
# (scripts/count_ops.py, when present), the authors' code beside depinduce (when their checkouts are given),
# training tokens/s of the paper networks at the recipes' 4,096-token batch for precision fp32/tf32/bf16 × compile
# off/default/reduce-overhead (scripts/bench_train.py), and end-to-end `depinduce train` tokens/s of the paper
# recipes (each run's tokens read / its seconds in training steps, from metrics.jsonl).
#
#   bash scripts/gpu_check.sh                   # from the repository root, on the machine with the GPU
#   GPU_CHECK_DRY=1 bash scripts/gpu_check.sh   # on a CPU: tiny networks, seconds per cell (proves the script)
#
# Nothing is fetched from the network: the package is installed with `pip install --no-deps -e .` against the
# torch already there; the text is NLTK's Brown corpus when NLTK_DATA (or ./shared or ../shared/nltk_data) has it,
# else a generated corpus of the same size.  Knobs (environment): GPU_CHECK_MODELS (default "structformer udgn"),
# GPU_CHECK_DEVICE (default cuda), GPU_CHECK_MINUTES (each end-to-end run's --max-time, default 1.0),
# GPU_CHECK_LIMIT (hard limit in seconds per training command, default 90), GPU_CHECK_CELL (seconds timed per
# benchmark cell, default 5), GPU_CHECK_CELL_LIMIT (hard limit per eager cell, default 12) and
# GPU_CHECK_COMPILE_LIMIT (per compiled cell, compilation included, default 45): the defaults' 12 cells, UDGN's
# LSTM-per-direction cell and 2 runs take about 7–8 minutes when the cells finish inside their limits and at most
# about 9.5 when every one runs to its limit; GPU_CHECK_PRECISIONS (default "fp32 tf32 bf16"), GPU_CHECK_COMPILES (default "off reduce-overhead";
# add "default" for inductor without CUDA graphs), GPU_CHECK_STRUCTFORMER / GPU_CHECK_UDGN (the
# authors' checkouts: google-research's folder holding structformer/, yikangshen/UDGN; unset: no authors' rows),
# GPU_CHECK_INSTALL=0 (already installed), GPU_CHECK_DRY=1 (CPU dry run: tiny networks, a small generated corpus).
# A cell over its limit reads "over limit" (raise GPU_CHECK_COMPILE_LIMIT where compilation takes longer).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
MODELS="${GPU_CHECK_MODELS:-structformer udgn}"
DEVICE="${GPU_CHECK_DEVICE:-cuda}"
MINUTES="${GPU_CHECK_MINUTES:-1.0}"
LIMIT="${GPU_CHECK_LIMIT:-90}"
CELL="${GPU_CHECK_CELL:-5}"
CELL_LIMIT="${GPU_CHECK_CELL_LIMIT:-12}"
COMPILE_LIMIT="${GPU_CHECK_COMPILE_LIMIT:-45}"
PRECISIONS="${GPU_CHECK_PRECISIONS:-fp32 tf32 bf16}"
COMPILES="${GPU_CHECK_COMPILES:-off reduce-overhead}"
DRY="${GPU_CHECK_DRY:-0}"
CONFIG=(--configs paper)
TRAIN_SETS=()
if [ "$DRY" = 1 ]; then  # a CPU proof of the script: tiny networks, a small corpus, seconds per cell
  DEVICE=cpu; MINUTES="${GPU_CHECK_MINUTES:-0.1}"; CELL="${GPU_CHECK_CELL:-1}"
  CONFIG=(--configs small --set hidden_size=32 --set n_layers=1)
  TRAIN_SETS=(--set model_config.hidden_size=32 --set model_config.n_layers=1 --set epochs=1 --set dev_parse=false)
fi
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
if [ -n "${NLTK_DATA:-}" ] && [ "$DRY" != 1 ]; then
  SOURCE="NLTK Brown"
  "$PY" -m depinduce preprocess text --nltk-corpus brown --out "$WORK/data" --quiet
else
  SOURCE="generated text"
  "$PY" - "$WORK/text.txt" "$([ "$DRY" = 1 ] && echo 2000 || echo 57000)" <<'PY'
import random, sys
rng = random.Random(0)
words = [f"w{i}" for i in range(8000)]
weights = [1 / (rank + 1) for rank in range(len(words))]  # Zipf, as in text
with open(sys.argv[1], "w") as out:
    for _ in range(int(sys.argv[2])):
        out.write(" ".join(rng.choices(words, weights, k=rng.randint(5, 35))) + "\n")
PY
  "$PY" -m depinduce preprocess text --one-per-line "$WORK/text.txt" --out "$WORK/data" --quiet
fi

RESULTS="$WORK/results.jsonl"
touch "$RESULTS"
note() {  # MODEL WHAT PRECISION COMPILE NOTE: a row without a figure
  "$PY" -c 'import json,sys; print(json.dumps(dict(zip(("model","what","precision","compile","note"),sys.argv[1:]))))' \
    "$@" >>"$RESULTS"
}

# 1. ops per step of the measured backends (scripts/count_ops.py; every backend: run it alone), as it prints them
if [ -f scripts/count_ops.py ]; then
  echo "== ops per step" >&2
  # shellcheck disable=SC2086
  if timeout "$LIMIT" "$PY" scripts/count_ops.py --device "$DEVICE" --route device --models $MODELS >"$WORK/ops.txt" 2>"$WORK/ops.err"; then
    while IFS= read -r line; do [ -n "$line" ] && note "-" "ops per step" "-" "-" "$line"; done <"$WORK/ops.txt"
  elif [ "$?" = 124 ]; then
    note "-" "ops per step" "-" "-" "count_ops.py over limit (${LIMIT} s)"
  else
    note "-" "ops per step" "-" "-" "count_ops.py failed: $(grep -v -e "^USDT" -e "^\s*$" "$WORK/ops.err" | tail -1)"
  fi
  case " $MODELS " in *" udgn "*)  # UDGN's LSTM one direction at a time (the CPU's route) instead of packed
    if DEPINDUCE_LSTM_ROUTE=per-direction timeout "$LIMIT" "$PY" scripts/count_ops.py --device "$DEVICE" --route device --models udgn \
        >"$WORK/ops-lstm.txt" 2>"$WORK/ops-lstm.err"; then
      tail -n +2 "$WORK/ops-lstm.txt" | while IFS= read -r line; do
        [ -n "$line" ] && note "-" "ops per step, LSTM per direction" "-" "-" "$line"; done
    else
      note "-" "ops per step, LSTM per direction" "-" "-" "failed or over limit: $(tail -1 "$WORK/ops-lstm.err")"
    fi;;
  esac
else
  note "-" "ops per step" "-" "-" "scripts/count_ops.py is not in this checkout"
fi

# 2. the authors' code beside depinduce (bench_authors.py: the same batches and step on both sides)
for model in $MODELS; do
  case "$model" in structformer) authors="${GPU_CHECK_STRUCTFORMER:-}";; udgn) authors="${GPU_CHECK_UDGN:-}";; *) authors="";; esac
  if [ -z "$authors" ]; then
    note "$model" "authors' code" "fp32" "off" "not measured: set GPU_CHECK_$(echo "$model" | tr a-z A-Z) to their checkout"
    continue
  fi
  echo "== $model: the authors' code" >&2
  timeout "$LIMIT" "$PY" scripts/bench_authors.py --model "$model" --authors "$authors" "${CONFIG[@]}" \
    --device "$DEVICE" --rounds 1 >"$WORK/authors-$model.json" 2>"$WORK/authors-$model.err" \
    && "$PY" - "$model" "$WORK/authors-$model.json" >>"$RESULTS" <<'PY' || note "$model" "authors' code" fp32 off "failed: $(tail -1 "$WORK/authors-$model.err")"
import json, sys
record = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
speeds = {k: v for k, v in record.items() if "tokens_per_s" in k}
for side in ("authors", "depinduce"):
    value = next((v for k, v in speeds.items() if k.startswith(side)), None)
    print(json.dumps({"model": sys.argv[1], "what": f"{side} (bench_authors.py)", "precision": "fp32",
                      "compile": "off", "tokens_per_s": value}))
PY
done

# 3. precision × compile at the recipes' 4,096-token batch (bench_train.py; a fresh process per cell)
for model in $MODELS; do
  for precision in $PRECISIONS; do
    for mode in $COMPILES; do
      echo "== $model: $precision, compile $mode" >&2
      out="$WORK/bench-$model-$precision-$mode"
      limit="$CELL_LIMIT"; [ "$mode" = off ] || limit="$COMPILE_LIMIT"  # compilation counts against the cell
      if timeout "$limit" "$PY" scripts/bench_train.py --model "$model" "${CONFIG[@]}" --device "$DEVICE" \
          --precision "$precision" --compile "$mode" --seconds "$CELL" --batch-tokens 4096 >"$out.json" 2>"$out.err"; then
        "$PY" -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print(json.dumps({"model": sys.argv[2], "what": "bench_train.py step", "precision": sys.argv[3], "compile": sys.argv[4], "tokens_per_s": r["tokens_per_s"], "note": str(r["steps"]) + " steps"}))' \
          "$out.json" "$model" "$precision" "$mode" >>"$RESULTS"
      elif [ "$?" = 124 ]; then
        note "$model" "bench_train.py step" "$precision" "$mode" "over limit (${limit} s, compilation included)"
      else
        note "$model" "bench_train.py step" "$precision" "$mode" "$(grep -v '^\s*$' "$out.err" | tail -1 | cut -c1-150)"
      fi
    done
  done
done

# 3b. UDGN's LSTM one direction at a time (DEPINDUCE_LSTM_ROUTE=per-direction) beside its packed default, fp32 eager
case " $MODELS " in *" udgn "*)
  echo "== udgn: fp32, compile off, LSTM per direction" >&2
  out="$WORK/bench-udgn-lstm"
  if DEPINDUCE_LSTM_ROUTE=per-direction timeout "$CELL_LIMIT" "$PY" scripts/bench_train.py --model udgn "${CONFIG[@]}" \
      --device "$DEVICE" --precision fp32 --compile off --seconds "$CELL" --batch-tokens 4096 >"$out.json" 2>"$out.err"; then
    "$PY" -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print(json.dumps({"model": "udgn", "what": "bench_train.py step, LSTM per direction", "precision": "fp32", "compile": "off", "tokens_per_s": r["tokens_per_s"], "note": str(r["steps"]) + " steps"}))' \
      "$out.json" >>"$RESULTS"
  else
    note udgn "bench_train.py step, LSTM per direction" fp32 off "failed or over limit: $(grep -v '^\s*$' "$out.err" | tail -1 | cut -c1-150)"
  fi;;
esac

# 4. end to end: `depinduce train` with the paper recipe, as it ships
for model in $MODELS; do
  echo "== $model: depinduce train --recipe $model-ptb" >&2
  out="$WORK/train-$model"
  if timeout "$LIMIT" "$PY" -m depinduce train --recipe "$model-ptb" --data "$WORK/data" --device "$DEVICE" \
      --max-time "$MINUTES" --out "$out" --quiet "${TRAIN_SETS[@]}" >"$out.log" 2>&1; then
    "$PY" - "$out" "$model" >>"$RESULTS" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1] + "/metrics.jsonl")]
last = records[-1]
print(json.dumps({"model": sys.argv[2], "what": "depinduce train (paper recipe)", "precision": "fp32",
                  "compile": "off", "tokens_per_s": last["tokens_seen"] / last["train_s"] if last.get("train_s") else None,
                  "note": f"{last['tokens_seen']:,} tokens in {last.get('train_s', 0):.0f} s of steps"}))
PY
  else
    note "$model" "depinduce train (paper recipe)" fp32 off "exit $?: $(tail -1 "$out.log" | cut -c1-150)"
  fi
done

"$PY" - "$RESULTS" "$SOURCE" "$DEVICE" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
print(f"| model | what ({sys.argv[2]}, {sys.argv[3]}) | precision | compile | tokens/s | note |")
print("|---|---|---|---|--:|---|")
for r in rows:
    speed = r.get("tokens_per_s")
    figure = "–" if speed is None else f"{speed:,.0f}"
    print(f"| {r['model']} | {r['what']} | {r['precision']} | {r['compile']} | {figure} | {r.get('note', '')} |")
PY
