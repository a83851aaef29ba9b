#!/usr/bin/env bash
# Issue 15's side-by-side figure (docs/scheduling.md, "Prefix caching against llama-server"):
# C concurrent conversations of T turns on bench-250m bf16, each turn resending the whole
# history plus U new words and generating O tokens, sent by the same client (llmserve bench
# serve --multi-turn-*) to llmserve serve (prefix caching on, then off) and to llama-server
# (-np C, its per-slot prompt cache). Usage:
#   scripts/experiments/prefix_cache_vs_llamacpp.sh [LLAMA_CPP_BIN_DIR]   (default ../peers/llama.cpp/build/bin)
# Environment: C (4), T (8), U (100), O (32), THREADS (2), WORK (/tmp/llmserve-prefix).
# Needs a build (scripts/build.sh) and llama.cpp's llama-server (DEVELOPERS.md). Never part of
# the test suite.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=build/bin
LLAMA=${1:-../peers/llama.cpp/build/bin}
C=${C:-4}; T=${T:-8}; U=${U:-100}; O=${O:-32}; THREADS=${THREADS:-2}
WORK=${WORK:-/tmp/llmserve-prefix}
mkdir -p "$WORK"
MODEL="$WORK/bench-250m-bf16.gguf"
[ -f "$MODEL" ] || "$BIN/llmserve" make-model --preset bench-250m --dtype bf16 --seed 1 --out "$MODEL"
CLIENT=(--multi-turn-conversations "$C" --multi-turn-turns "$T" --multi-turn-new-tokens "$U"
        --output-len "$O" --seed 1 --json)
wait_health() { until curl -sf "http://127.0.0.1:$1/health" > /dev/null; do sleep 0.5; done; }

run_ours() {  # $1 = tag, rest = extra serve flags
  local tag=$1; shift
  "$BIN/llmserve" serve "$MODEL" --port 18441 --threads "$THREADS" --max-model-len 4096 \
    --log-level warn "$@" > "$WORK/serve.$tag.log" 2>&1 &
  local pid=$!
  wait_health 18441
  "$BIN/llmserve" bench serve --url http://127.0.0.1:18441 "${CLIENT[@]}" > "$WORK/$tag.json"
  kill -TERM $pid; wait $pid || true
}
run_ours llmserve
run_ours llmserve-nocache --no-enable-prefix-caching
"$LLAMA/llama-server" -m "$MODEL" --port 18442 -t "$THREADS" -np "$C" -c $((C * 4096)) \
  > "$WORK/serve.llama.log" 2>&1 &
pid=$!
wait_health 18442
"$BIN/llmserve" bench serve --url http://127.0.0.1:18442 "${CLIENT[@]}" > "$WORK/llama-server.json"
kill -TERM $pid; wait $pid || true

python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
print("| server | TTFT p50 turn 1 -> last (s) | ratio | whole run (s) | prefix-cache hit rate |")
print("|---|---|---|---|---|")
for tag in ("llmserve", "llmserve-nocache", "llama-server"):
    d = json.load(open(f"{work}/{tag}.json"))
    turns = d["turns"]
    t1, tn = turns[0]["ttft_ms"]["median"] / 1e3, turns[-1]["ttft_ms"]["median"] / 1e3
    hr = d.get("prefix_cache_hit_rate")
    hr = "n/a" if hr is None else f"{100 * hr:.1f}%"
    print(f"| {tag} | {t1:.2f} -> {tn:.2f} | {tn / t1:.2f}x | {d['duration_s']:.1f} | {hr} |")
PY
