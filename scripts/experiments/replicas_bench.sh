#!/usr/bin/env bash
# Issue 19's figures (docs/deployment.md, "Measured"): on this machine's cores,
#   A. aggregate throughput of 1 replica x N cores (--threads N, taskset over all N cores)
#      against N replicas x 1 core (--threads 1, each pinned to its own core) behind nginx
#      (least_conn), with the same client and workload (llmserve bench serve);
#   B. multi-turn TTFT through nginx over the N single-core replicas, least_conn against
#      X-Session-Id affinity (replicas_multiturn.mjs).
# Usage: scripts/experiments/replicas_bench.sh     (needs a build and nginx; never part of ctest)
# Environment: MODEL (default: bench-25m f32 made by make-model), CORES (2), WORK
# (/tmp/llmserve-replicas), NUM_PROMPTS (64), INPUT_LEN (256), OUTPUT_LEN (64),
# CONCURRENCY (16), C/T/U/O for the multi-turn run (8/5/150/32), ROUNDS (2: every
# configuration is run ROUNDS times, interleaved, so that a noisy neighbour shows as spread).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BIN=$ROOT/build/bin/llmserve
CORES=${CORES:-2}
WORK=${WORK:-/tmp/llmserve-replicas}
NUM_PROMPTS=${NUM_PROMPTS:-64}; INPUT_LEN=${INPUT_LEN:-256}; OUTPUT_LEN=${OUTPUT_LEN:-64}
CONCURRENCY=${CONCURRENCY:-16}
ROUNDS=${ROUNDS:-2}
C=${C:-8}; T=${T:-5}; U=${U:-150}; O=${O:-32}
mkdir -p "$WORK"
chmod 755 "$WORK"
MODEL=${MODEL:-$WORK/bench-25m-f32.gguf}
[ -f "$MODEL" ] || "$BIN" make-model --preset bench-25m --dtype f32 --seed 1 --out "$MODEL"
SERVE=(--max-model-len 4096 --disable-log-requests --log-level warn)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
wait_health() { until curl -sf "http://127.0.0.1:$1/health" > /dev/null; do sleep 0.2; done; }

start_replica() {  # PORT CPUS THREADS
  taskset -c "$2" "$BIN" serve "$MODEL" --port "$1" --threads "$3" --replica-id "r$1" \
    "${SERVE[@]}" > "$WORK/serve.$1.log" 2>&1 &
  PIDS+=($!)
  wait_health "$1"
}
start_nginx() {  # NAME PORT [render flags] UPSTREAMS...
  local name=$1 port=$2
  shift 2
  mkdir -p "$WORK/$name"
  deploy/nginx/render.sh --prefix "$WORK/$name" --listen "127.0.0.1:$port" --workers 1 "$@" \
    > "$WORK/$name/nginx.conf"
  nginx -p "$WORK/$name" -e "$WORK/$name/error.log" -c "$WORK/$name/nginx.conf" -g 'daemon off;' &
  PIDS+=($!)
  until curl -sf "http://127.0.0.1:$port/lb-health" > /dev/null; do sleep 0.1; done
}
stop_all() { cleanup; PIDS=(); sleep 0.5; }
bench() {  # TAG URL
  "$BIN" bench serve --url "$2" --num-prompts "$NUM_PROMPTS" --input-len "$INPUT_LEN" \
    --output-len "$OUTPUT_LEN" --max-concurrency "$CONCURRENCY" --model-file "$MODEL" \
    --seed 1 --json > "$WORK/$1.json"
  node -e 'const j=require(process.argv[1]); console.log(`${process.argv[2].padEnd(28)} ` +
    `out ${j.output_throughput.toFixed(1)} tok/s, total ${j.total_token_throughput.toFixed(1)} tok/s, ` +
    `TTFT mean ${j.ttft_ms.mean.toFixed(0)} ms p99 ${j.ttft_ms.p99.toFixed(0)} ms, ` +
    `TPOT mean ${j.tpot_ms.mean.toFixed(1)} ms, failed ${j.failed}`)' "$WORK/$1.json" "$1"
}
all_cores="0-$((CORES - 1))"
echo "model $MODEL; $CORES cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "A. throughput: $NUM_PROMPTS prompts, input $INPUT_LEN, output $OUTPUT_LEN, concurrency $CONCURRENCY"
ups=()
for ((i = 0; i < CORES; ++i)); do ups+=("127.0.0.1:$((18511 + i))"); done
for ((round = 1; round <= ROUNDS; ++round)); do
  # A fresh replica for every measurement: the same seed sends the same prompts, which a
  # replica that has seen them would answer from its prefix cache.
  start_replica 18501 "$all_cores" "$CORES"
  bench "1x${CORES}-direct.$round" http://127.0.0.1:18501
  stop_all
  start_replica 18501 "$all_cores" "$CORES"
  start_nginx lb1 18500 127.0.0.1:18501
  bench "1x${CORES}-nginx.$round" http://127.0.0.1:18500
  stop_all
  for ((i = 0; i < CORES; ++i)); do start_replica $((18511 + i)) "$i" 1; done
  start_nginx lbN 18510 "${ups[@]}"
  bench "${CORES}x1-nginx-least_conn.$round" http://127.0.0.1:18510
  stop_all
done

echo "B. multi-turn TTFT: $C conversations x $T turns, $U new words per turn, $O tokens out"
reps=()
for u in "${ups[@]}"; do reps+=(--replica "http://$u"); done
for ((round = 1; round <= ROUNDS; ++round)); do
  # Fresh replicas (empty caches) for each run.
  for ((i = 0; i < CORES; ++i)); do start_replica $((18511 + i)) "$i" 1; done
  start_nginx lbN 18510 "${ups[@]}"
  node scripts/experiments/replicas_multiturn.mjs --url http://127.0.0.1:18510 \
    --conversations "$C" --turns "$T" --words "$U" --output "$O" "${reps[@]}" |
    tee "$WORK/multiturn-least_conn.$round.json"
  stop_all
  for ((i = 0; i < CORES; ++i)); do start_replica $((18511 + i)) "$i" 1; done
  start_nginx lbA 18520 --affinity "${ups[@]}"
  node scripts/experiments/replicas_multiturn.mjs --url http://127.0.0.1:18520 --session \
    --conversations "$C" --turns "$T" --words "$U" --output "$O" "${reps[@]}" |
    tee "$WORK/multiturn-affinity.$round.json"
  stop_all
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
