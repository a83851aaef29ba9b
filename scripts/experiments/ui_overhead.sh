#!/usr/bin/env bash
# Issue 18's overhead figure (docs/ui.md, "Overhead"): output throughput of one `llmserve
# serve` under `llmserve bench serve`, with no dashboard open against one dashboard reading
# GET /ui/events (every step, kv and metrics event), runs interleaved ROUNDS times in the same
# process so that drift and noisy neighbours show as spread, not as overhead.
# Usage: scripts/experiments/ui_overhead.sh    (needs a build; never part of ctest)
# Environment: MODEL (default: bench-25m f32 made by make-model), WORK (/tmp/llmserve-ui),
# NUM_PROMPTS (64), INPUT_LEN (128), OUTPUT_LEN (64), CONCURRENCY (32), ROUNDS (3), PORT (18480).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=$(pwd)/build/bin/llmserve
WORK=${WORK:-/tmp/llmserve-ui}
NUM_PROMPTS=${NUM_PROMPTS:-64}; INPUT_LEN=${INPUT_LEN:-128}; OUTPUT_LEN=${OUTPUT_LEN:-64}
CONCURRENCY=${CONCURRENCY:-32}; ROUNDS=${ROUNDS:-3}; PORT=${PORT:-18480}
mkdir -p "$WORK"
MODEL=${MODEL:-$WORK/bench-25m-f32.gguf}
[ -f "$MODEL" ] || "$BIN" make-model --preset bench-25m --dtype f32 --seed 1 --out "$MODEL"
"$BIN" serve "$MODEL" --port "$PORT" --max-model-len 1024 --disable-log-requests \
  --log-level warn > "$WORK/serve.log" 2>&1 &
SERVER=$!
READER=""
trap 'kill $SERVER $READER 2>/dev/null || true' EXIT
until curl -sf "http://127.0.0.1:$PORT/health" > /dev/null; do sleep 0.2; done
run() {  # TAG
  "$BIN" bench serve --url "http://127.0.0.1:$PORT" --num-prompts "$NUM_PROMPTS" \
    --input-len "$INPUT_LEN" --output-len "$OUTPUT_LEN" --max-concurrency "$CONCURRENCY" \
    --model-file "$MODEL" --seed 1 --json > "$WORK/$1.json"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["output_throughput"])' "$WORK/$1.json"
}
closed=(); open=()
run warmup > /dev/null
for r in $(seq 1 "$ROUNDS"); do
  closed+=("$(run closed.$r)")
  curl -sN "http://127.0.0.1:$PORT/ui/events" > "$WORK/events.$r.txt" &
  READER=$!
  sleep 0.5
  open+=("$(run open.$r)")
  kill $READER; wait $READER 2>/dev/null || true; READER=""
  echo "round $r: closed ${closed[-1]} tok/s, open ${open[-1]} tok/s," \
       "$(grep -c '^event: step' "$WORK/events.$r.txt") step events read," \
       "$(wc -c < "$WORK/events.$r.txt") bytes"
done
python3 - "${closed[*]}" "${open[*]}" <<'PY'
import statistics, sys
c = [float(x) for x in sys.argv[1].split()]; o = [float(x) for x in sys.argv[2].split()]
mc, mo = statistics.median(c), statistics.median(o)
print(f"median output tok/s: closed {mc:.1f}, open {mo:.1f}; open/closed = {mo / mc:.4f} "
      f"(overhead {100 * (1 - mo / mc):+.2f} %; closed spread {min(c):.1f}-{max(c):.1f})")
PY
