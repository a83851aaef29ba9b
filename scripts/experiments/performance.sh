#!/usr/bin/env bash
# Issue 4's end-to-end performance figures on bench-250m (docs/performance.md). Usage:
#   scripts/experiments/performance.sh [MODEL.gguf]        (REPEAT=3 THREADS=2 by default)
# Default model: bench-250m bf16 written by `llmserve make-model --preset bench-250m --dtype
# bf16 --seed 1` into /tmp (reused when present). Needs a build (./test.sh or scripts/build.sh).
# This machine's limits are measured right before each figure (bench_probes: read bandwidth,
# fp32 FMA peak), because the VM's cores are shared and their speed varies from minute to
# minute; every figure is printed with its fraction of the limit measured next to it.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=build/bin
MODEL=${1:-/tmp/bench-250m-bf16.gguf}
THREADS=${THREADS:-2}
REPEAT=${REPEAT:-3}
if [ ! -f "$MODEL" ]; then
  "$BIN/llmserve" make-model --preset bench-250m --dtype bf16 --seed 1 --out "$MODEL"
fi
OUT=${OUT_DIR:-/tmp/llmserve-perf}
mkdir -p "$OUT"
COMMON=(--log-level warn --seed 1 --threads "$THREADS" --max-model-len 1024)

probe() { "$BIN/bench_probes" --benchmark_format=json > "$OUT/$1.probe.json" 2> /dev/null; }
run() {  # name args...
  local name=$1; shift
  probe "$name"
  "$BIN/llmserve" bench "$MODEL" "${COMMON[@]}" "$@" --json > "$OUT/$name.json" 2> "$OUT/$name.log"
}
for i in $(seq 1 "$REPEAT"); do
  run "decode.$i" --num-prompts 1 --input-len 16 --output-len 256
  run "prefill512.$i" --num-prompts 1 --input-len 512 --output-len 1
  run "concurrent32.$i" --num-prompts 32 --input-len 150 --output-len 64 ${EXTRA_32:-}
done

python3 - "$OUT" "$REPEAT" <<'PY'
import json, statistics, sys
out, repeat = sys.argv[1], int(sys.argv[2])
def limits(name):
    p = json.load(open(f"{out}/{name}.probe.json"))["benchmarks"][0]
    return p["read_GBps"], p["fp32_fma_GFLOPs"]
# bench-250m: dim 1024, 16 layers, 16 heads, 4 KV heads, head_dim 64, ffn 2816, vocab 32000.
L, dim, q, kv, ffn, vocab = 16, 1024, 1024, 256, 2816, 32000
layer_params = dim * (q + 2 * kv) + q * dim + 3 * dim * ffn
bytes_per_token = (L * layer_params + vocab * dim) * 2  # bf16 weights read once per step
n = 512
prefill_flops = 2 * n * L * layer_params + 2 * vocab * dim + L * 4 * 16 * 64 * n * (n + 1) / 2
rows = {"decode": [], "prefill": [], "c32": []}
for i in range(1, repeat + 1):
    bw, _ = limits(f"decode.{i}")
    d = json.load(open(f"{out}/decode.{i}.json"))
    tps = 1e3 / d["tpot_ms"]["median"]
    rows["decode"].append((tps, tps / (bw * 1e9 / bytes_per_token), bw))
    _, peak = limits(f"prefill512.{i}")
    p = json.load(open(f"{out}/prefill512.{i}.json"))
    ttft = p["ttft_ms"]["median"] / 1e3
    rows["prefill"].append((n / ttft, prefill_flops / ttft / 1e9, prefill_flops / ttft / 1e9 / peak, peak))
    c = json.load(open(f"{out}/concurrent32.{i}.json"))
    rows["c32"].append((c["output_throughput"], c["ttft_ms"]["median"] / 1e3, c["tpot_ms"]["median"]))
    print(f"run {i}: decode {tps:.1f} tok/s ({rows['decode'][-1][1]:.0%} of roofline at {bw:.1f} GB/s) | "
          f"prefill512 {n/ttft:.0f} tok/s, {rows['prefill'][-1][1]:.0f} GFLOP/s "
          f"({rows['prefill'][-1][2]:.0%} of {peak:.0f}) | 32 concurrent {c['output_throughput']:.1f} tok/s, "
          f"TTFT p50 {rows['c32'][-1][1]:.2f} s, TPOT p50 {rows['c32'][-1][2]:.0f} ms")
med = lambda xs: statistics.median(xs)
print(f"median of {repeat}: decode {med([r[0] for r in rows['decode']]):.1f} tok/s = "
      f"{med([r[1] for r in rows['decode']]):.0%} of the bandwidth roofline "
      f"({bytes_per_token/1e6:.0f} MB/token) | prefill 512 {med([r[0] for r in rows['prefill']]):.0f} tok/s = "
      f"{med([r[2] for r in rows['prefill']]):.0%} of fp32 FMA peak | 32 concurrent "
      f"{med([r[0] for r in rows['c32']]):.1f} output tok/s, TTFT p50 {med([r[1] for r in rows['c32']]):.2f} s")
PY
