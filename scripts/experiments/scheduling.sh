#!/usr/bin/env bash
# Scheduling experiments of docs/scheduling.md. Usage:
#   scripts/experiments/scheduling.sh N [MODEL.gguf]     N = 1..4
# Writes JSON results and SVG timelines under docs/figures/ and prints a summary table.
# Default model: ../shared/models/stories260K/stories260K.gguf (max_model_len 512).
set -euo pipefail
cd "$(dirname "$0")/../.."
EXP=${1:?experiment number 1-4}
MODEL=${2:-../shared/models/stories260K/stories260K.gguf}
TAG=$(basename "$MODEL" .gguf)
BIN=build/bin/llmserve
OUT=docs/figures
mkdir -p "$OUT"
COMMON=(--log-level warn --seed 1 --threads "${THREADS:-2}")
case "$TAG" in
  stories260K) COMMON+=(--max-model-len 512) ;;
esac

summary() {  # file label
  python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
f = lambda x: "-" if x is None else f"{x:.1f}"
print(f"{sys.argv[2]:<28} tok/s {d['output_throughput']:8.1f}  req/s {d['request_throughput']:6.2f}  "
      f"TTFT p50/p99 {d['ttft_ms']['median']:8.1f}/{d['ttft_ms']['p99']:8.1f} ms  "
      f"ITL p99 {d['itl_ms']['p99']:7.2f} ms  E2E p99 {d['e2e_ms']['p99']:8.1f} ms  "
      f"steps {d['num_steps']}  preempt {d['num_preemptions']}")
PY
}

run() {  # name extra-args...
  local name=$1; shift
  if ! "$BIN" bench "$MODEL" "${COMMON[@]}" "$@" --json --timeline "$OUT/$name.svg" \
      > "$OUT/$name.json" 2> "/tmp/$name.log"; then
    tail -3 "/tmp/$name.log" >&2
    exit 1
  fi
  summary "$OUT/$name.json" "$name"
}

case "$EXP" in
  1)  # static vs dynamic vs continuous, widely varying output lengths, Poisson arrivals
    W=(--num-prompts 64 --input-len 32 --output-len 160 --range-ratio 0.9 --request-rate 100
       --max-num-seqs 8 --max-num-batched-tokens 2048)
    for mode in static dynamic continuous; do
      run "exp1_${TAG}_$mode" "${W[@]}" --batching "$mode" --max-delay-ms 50
    done ;;
  2)  # which limit binds: long prompts (prefill) then many decodes
    run "exp2_${TAG}_limits" --num-prompts 32 --input-len 320 --output-len 64 --range-ratio 0.2 \
      --request-rate inf --max-num-seqs 8 --max-num-batched-tokens 256
    python3 - "$OUT/exp2_${TAG}_limits.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("prefill_steps", "decode_steps"):
    s = d[k]
    print(f"{k:<14} steps {s['num_steps']:5d}  token budget used up in {100*s['budget_bound_frac']:5.1f}%  "
          f"all seats taken in {100*s['seqs_bound_frac']:5.1f}%  mean tokens {s['mean_tokens']:6.1f}  "
          f"mean running {s['mean_running']:4.1f}")
PY
    ;;
  3)  # prefill-first vs mixed vs chunked while long prompts arrive during decodes
    W=(--num-prompts 48 --input-len 256 --output-len 64 --range-ratio 0.6 --request-rate 40
       --max-num-seqs 16)
    run "exp3_${TAG}_prefill_first" "${W[@]}" --no-enable-chunked-prefill \
      --prefill-policy prefill-first --max-num-batched-tokens 512
    run "exp3_${TAG}_mixed" "${W[@]}" --no-enable-chunked-prefill --prefill-policy mixed \
      --max-num-batched-tokens 512
    run "exp3_${TAG}_chunked" "${W[@]}" --enable-chunked-prefill --max-num-batched-tokens 64
    ;;
  4)  # paged KV utilisation vs a contiguous max_model_len reservation per request
    run "exp4_${TAG}_paged" --num-prompts 64 --input-len 64 --output-len 128 --range-ratio 0.9 \
      --request-rate 100 --max-num-seqs 16 --max-num-batched-tokens 2048
    python3 - "$OUT/exp4_${TAG}_paged.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"paged pool: KV utilisation mean {100*d['kv_utilization_mean']:.1f}% peak "
      f"{100*d['kv_utilization_peak']:.1f}%; contiguous max_model_len reservation would be "
      f"{100*d['contiguous_utilization_mean']:.1f}%")
PY
    ;;
  *) echo "unknown experiment $EXP" >&2; exit 1 ;;
esac
