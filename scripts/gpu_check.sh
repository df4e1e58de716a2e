#!/usr/bin/env bash
# GPU figures in one go (about 8 minutes on an H100/H200 with the defaults), printed as ONE table, in this order:
#   1. ops per step on the GPU (scripts/count_ops.py), UDGN's LSTM per direction (the default) and packed;
#   2. the authors' code beside depinduce at fp32, TF32 off on both sides (scripts/bench_authors.py; when their
#      checkouts are given);
#   3. training tokens/s of the paper networks at the recipes' 4,096-token batch for precision fp32/tf32/bf16,
#      eager, over every batch shape (scripts/bench_train.py), UDGN with its LSTM packed, and StructFormer's
#      eager step padded to static shapes;
#   4. end-to-end `depinduce train --recipe MODEL-ptb` as it ships, and StructFormer's under GPU_CHECK_FAST
#      (each run's tokens read / its seconds in training steps, from metrics.jsonl);
#   5. compiled steps last: on the most frequent batch shape(s), each compiled before the clock starts (the
#      warm-up's seconds are in the row), beside the eager step on the same batches.
#
#   bash scripts/gpu_check.sh                   # from the repository root, on the machine with the GPU
#   GPU_CHECK_DRY=1 bash scripts/gpu_check.sh   # on a CPU: tiny networks, seconds per cell (proves the script)
#
# Nothing is fetched from the network: the package is installed with `pip install --no-deps -e .` against the
# torch already there (its dependencies must be importable); the text is NLTK's Brown corpus when NLTK_DATA (or
# ./shared or ../shared/nltk_data) has it, else a generated corpus of the same size.  Knobs (environment):
#   GPU_CHECK_MODELS             backends (default "structformer udgn")
#   GPU_CHECK_DEVICE             default cuda
#   GPU_CHECK_STRUCTFORMER       google-research's checkout (the folder holding structformer/); unset: no row
#   GPU_CHECK_UDGN               yikangshen/UDGN's checkout; unset: no authors' row
#   GPU_CHECK_AUTHORS_STEPS      timed steps per side in bench_authors.py (default 40)
#   GPU_CHECK_PRECISIONS         eager cells' precisions (default "fp32 tf32 bf16")
#   GPU_CHECK_CELL               seconds timed per cell (default 4); GPU_CHECK_CELL_LIMIT: hard limit per eager
#                                cell, start-up included (default 40; a cell takes about 17 s on an H200 host)
#   GPU_CHECK_MINUTES            each end-to-end run's --max-time (default 0.4); GPU_CHECK_LIMIT: hard limit per
#                                training command (default 90)
#   GPU_CHECK_FAST               --set values of the extra StructFormer run (default "precision=bf16"; empty: none)
#   GPU_CHECK_FAST_MODELS        backends given that run (default "structformer")
#   GPU_CHECK_COMPILE_MODELS     backends with compiled cells (default "structformer udgn"; empty: none); PRPN
#                                and the Probabilistic Transformer compile too, in fp32/tf32 only (PRPN's per-word
#                                loop unrolled in the trace): GPU_CHECK_MODELS="prpn probformer"
#                                GPU_CHECK_COMPILE_MODELS="prpn probformer" GPU_CHECK_COMPILE_PRECISIONS=tf32
#   GPU_CHECK_COMPILES           compile modes (default "cudagraphs": captured eager kernels, traced in seconds;
#                                "reduce-overhead" and "default" run inductor, over 90 s a shape on an H200 host)
#   GPU_CHECK_COMPILE_PRECISIONS precisions of the compiled cells (default "bf16")
#   GPU_CHECK_PADDED_MODELS      backends timed eager on static shapes too, fp32 (default "structformer"; empty:
#                                none): what the padding compiled steps run on costs an eager step
#   GPU_CHECK_COMPILE_SHAPES     batch shapes a compiled cell runs (default 1)
#   GPU_CHECK_COMPILE_LIMIT      hard limit per compiled cell, compilation included (default 90)
#   GPU_CHECK_KEEP=DIR           rows written to DIR/results.jsonl as they are measured, the table to DIR/table.md
#                                and every log to DIR/logs.tar.gz (a run cut short keeps what it measured)
#   GPU_CHECK_INSTALL=0          already installed; GPU_CHECK_DRY=1: CPU dry run (tiny networks, small corpus)
#   PYTHON                       the interpreter (default python)
# A cell over its limit reads "over limit"; every other failure shows the last line of its error.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
MODELS="${GPU_CHECK_MODELS:-structformer udgn}"
DEVICE="${GPU_CHECK_DEVICE:-cuda}"
MINUTES="${GPU_CHECK_MINUTES:-0.4}"
LIMIT="${GPU_CHECK_LIMIT:-90}"
CELL="${GPU_CHECK_CELL:-4}"
CELL_LIMIT="${GPU_CHECK_CELL_LIMIT:-40}"
COMPILE_LIMIT="${GPU_CHECK_COMPILE_LIMIT:-90}"
PRECISIONS="${GPU_CHECK_PRECISIONS:-fp32 tf32 bf16}"
COMPILES="${GPU_CHECK_COMPILES:-cudagraphs}"
COMPILE_MODELS="${GPU_CHECK_COMPILE_MODELS-structformer udgn}"
COMPILE_PRECISIONS="${GPU_CHECK_COMPILE_PRECISIONS:-bf16}"
PADDED_MODELS="${GPU_CHECK_PADDED_MODELS-structformer}"
COMPILE_SHAPES="${GPU_CHECK_COMPILE_SHAPES:-1}"
FAST="${GPU_CHECK_FAST-precision=bf16}"
FAST_MODELS="${GPU_CHECK_FAST_MODELS:-structformer}"
KEEP="${GPU_CHECK_KEEP:-}"
AUTHORS_STEPS="${GPU_CHECK_AUTHORS_STEPS:-40}"
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
if [ -n "$KEEP" ]; then  # rows land in KEEP as they are measured (a run cut short keeps what it measured)
  mkdir -p "$KEEP"; RESULTS="$(cd "$KEEP" && pwd)/results.jsonl"
  trap 'tar -czf "$KEEP/logs.tar.gz" -C "$WORK" --exclude=data --exclude=text.txt --exclude="*.pt" . 2>/dev/null; rm -rf "$WORK"' EXIT
fi
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
  case " $MODELS " in *" udgn "*)  # UDGN's LSTM packed instead of one direction at a time (the default)
    if DEPINDUCE_LSTM_ROUTE=packed timeout "$LIMIT" "$PY" scripts/count_ops.py --device "$DEVICE" --route device --models udgn \
        >"$WORK/ops-lstm.txt" 2>"$WORK/ops-lstm.err"; then
      tail -n +2 "$WORK/ops-lstm.txt" | while IFS= read -r line; do
        [ -n "$line" ] && note "-" "ops per step, LSTM packed" "-" "-" "$line"; done
    else
      note "-" "ops per step, LSTM packed" "-" "-" "failed or over limit: $(tail -1 "$WORK/ops-lstm.err")"
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
    --device "$DEVICE" --rounds 1 --steps "$AUTHORS_STEPS" >"$WORK/authors-$model.json" 2>"$WORK/authors-$model.err" \
    && "$PY" - "$model" "$WORK/authors-$model.json" >>"$RESULTS" <<'PY' || note "$model" "authors' code" fp32 off "failed: $(tail -1 "$WORK/authors-$model.err")"
import json, sys
record = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
for side in ("authors", "depinduce"):
    figures = record[side]
    memory = figures.get("peak_gpu_gb", figures.get("peak_rss_gb"))
    note = f"{figures['parameters_m']} M parameters, peak {memory} GB"
    if side == "depinduce":
        note += f"; speed {record['speed_ratio']}x, memory {record['memory_ratio']}x the authors'"
    print(json.dumps({"model": sys.argv[1], "what": f"{side} (bench_authors.py)", "precision": "fp32",
                      "compile": "off", "tokens_per_s": figures["tokens_per_s"], "note": note}))
PY
done

# 3. precision at the recipes' 4,096-token batch, eager (bench_train.py; a fresh process per cell)
cell() {  # MODEL PRECISION COMPILE WHAT [bench_train.py options...]: one timed cell, one row
  local model="$1" precision="$2" mode="$3" what="$4"; shift 4
  local out="$WORK/cell-$(( ++CELLS ))" limit="$CELL_LIMIT"
  [ "$mode" = off ] || limit="$COMPILE_LIMIT"  # compilation counts against the cell
  echo "== $model: $what, $precision, compile $mode" >&2
  if timeout "$limit" "$PY" scripts/bench_train.py --model "$model" "${CONFIG[@]}" --device "$DEVICE" \
      --precision "$precision" --compile "$mode" --seconds "$CELL" --batch-tokens 4096 "$@" >"$out.json" 2>"$out.err"; then
    "$PY" -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print(json.dumps({"model": sys.argv[2], "what": sys.argv[3], "precision": sys.argv[4], "compile": sys.argv[5], "tokens_per_s": r["tokens_per_s"], "note": str(r["steps"]) + " steps after " + str(r["warmup_steps"]) + " in " + str(r["warmup_s"]) + " s" + ("" if r.get("peak_gpu_gb") is None else ", GPU peak " + str(r["peak_gpu_gb"]) + " GB")}))' \
      "$out.json" "$model" "$what" "$precision" "$mode" >>"$RESULTS"
  elif [ "$?" = 124 ]; then
    note "$model" "$what" "$precision" "$mode" "over limit (${limit} s$([ "$mode" = off ] || echo ', compilation included'))"
  else
    note "$model" "$what" "$precision" "$mode" "$(grep -v -e '^\s*$' -e '^USDT' "$out.err" | tail -1 | cut -c1-150)"
  fi
}
CELLS=0
for model in $MODELS; do
  for precision in $PRECISIONS; do
    cell "$model" "$precision" off "bench_train.py step, every batch"
  done
done
case " $MODELS " in *" udgn "*)  # UDGN's LSTM packed beside its default (one direction at a time), fp32 eager
  DEPINDUCE_LSTM_ROUTE=packed cell udgn fp32 off "bench_train.py step, LSTM packed";;
esac
for model in $PADDED_MODELS; do  # the eager step padded to static shapes (what compiled steps run on) beside it
  cell "$model" fp32 off "bench_train.py step, padded (static_shapes: on)" --static-shapes on
done

# 4. end to end: `depinduce train` with the paper recipe as it ships, then StructFormer's under FAST_SETS
train_run() {  # MODEL LABEL [--set ...]: one `depinduce train --recipe MODEL-ptb` run of MINUTES, one row
  local model="$1" label="$2"; shift 2
  local out="$WORK/train-$(( ++CELLS ))"
  echo "== $model: depinduce train --recipe $model-ptb $*" >&2
  if timeout "$LIMIT" "$PY" -m depinduce train --recipe "$model-ptb" --data "$WORK/data" --device "$DEVICE" \
      --max-time "$MINUTES" --out "$out" --quiet "${TRAIN_SETS[@]}" "$@" >"$out.log" 2>&1; then
    "$PY" - "$out" "$model" "$label" >>"$RESULTS" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1] + "/metrics.jsonl")]
last = records[-1]
precision, _, mode = sys.argv[3].partition(" ")
print(json.dumps({"model": sys.argv[2], "what": "depinduce train (paper recipe)", "precision": precision,
                  "compile": mode or "off",
                  "tokens_per_s": last["tokens_seen"] / last["train_s"] if last.get("train_s") else None,
                  "note": f"{last['tokens_seen']:,} tokens in {last.get('train_s', 0):.0f} s of steps"}))
PY
  else
    note "$model" "depinduce train (paper recipe)" "$label" off "exit $?: $(tail -1 "$out.log" | cut -c1-150)"
  fi
}
for model in $MODELS; do
  train_run "$model" fp32
done
FAST_SETS=()
for setting in $FAST; do FAST_SETS+=(--set "$setting"); done
for model in $FAST_MODELS; do
  case " $MODELS " in *" $model "*) [ -n "$FAST" ] && train_run "$model" "$(echo "$FAST" | sed 's/precision=//; s/compile=//')" "${FAST_SETS[@]}";; esac
done

# 5. compiled steps, last (inductor takes over a minute a shape): on the COMPILE_SHAPES most frequent batch
#    shapes, each compiled before the clock starts, beside the eager step on the same batches
for model in $COMPILE_MODELS; do
  for precision in $COMPILE_PRECISIONS; do
    cell "$model" "$precision" off "bench_train.py step, ${COMPILE_SHAPES} shape(s)" --shapes "$COMPILE_SHAPES"
    for mode in $COMPILES; do
      [ "$mode" = off ] && continue
      cell "$model" "$precision" "$mode" "bench_train.py step, ${COMPILE_SHAPES} shape(s)" --shapes "$COMPILE_SHAPES"
    done
  done
done

"$PY" - "$RESULTS" "$SOURCE" "$DEVICE" <<'PY' | tee ${KEEP:+"$KEEP/table.md"}
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
print(f"| model | what ({sys.argv[2]}, {sys.argv[3]}) | precision | compile | tokens/s | note |")
print("|---|---|---|---|--:|---|")
for r in rows:
    speed = r.get("tokens_per_s")
    figure = "–" if speed is None else f"{speed:,.0f}"
    print(f"| {r['model']} | {r['what']} | {r['precision']} | {r['compile']} | {figure} | {r.get('note', '')} |")
PY
