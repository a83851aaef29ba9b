#!/usr/bin/env bash
# Issue 14's side-by-side figures (docs/performance.md, "Quantized weights"): llmserve vs
# llama.cpp on the same quantized GGUF files, each row measured in one run next to this
# machine's probed limits. Usage:
#   scripts/experiments/quant_vs_llamacpp.sh [LLAMA_CPP_BIN_DIR]      (default ../peers/llama.cpp/build/bin)
# Environment: TYPES (llama-quantize types, or BF16; default "Q4_K_M Q8_0 Q6_K Q5_0"), REPEAT (2),
# THREADS (2), ISA (empty = the best this CPU has; avx2 forces llmserve's plain AVX2 kernels,
# avxvnni its AVX2 kernels with AVX-VNNI),
# WORK (/tmp/llmserve-quant: model files and raw results), SERVE32=1 adds the 32-request
# serving row (llmserve serve vs llama-server, same client: llmserve bench serve), PRESET
# (make-model preset, default bench-250m; tinyllama-1.1b for the 1.1B shapes).
# Needs a build (scripts/build.sh) and llama.cpp's llama-bench, llama-quantize (and
# llama-server for SERVE32), built as DEVELOPERS.md says. Never part of the test suite.
#
# The files: PRESET from `llmserve make-model --preset PRESET --dtype bf16 --seed 1`,
# quantized by llama.cpp's own llama-quantize, so both engines read the very same bytes.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=build/bin
LLAMA=${1:-../peers/llama.cpp/build/bin}
TYPES=${TYPES:-"Q4_K_M Q8_0 Q6_K Q5_0"}
REPEAT=${REPEAT:-2}
THREADS=${THREADS:-2}
WORK=${WORK:-/tmp/llmserve-quant}
ISA=${ISA:-}
PRESET=${PRESET:-bench-250m}
mkdir -p "$WORK"
for tool in llama-bench llama-quantize; do
  [ -x "$LLAMA/$tool" ] || { echo "error: $LLAMA/$tool not found (build llama.cpp, DEVELOPERS.md)" >&2; exit 1; }
done
BF16="$WORK/$PRESET-bf16.gguf"
[ -f "$BF16" ] || "$BIN/llmserve" make-model --preset "$PRESET" --dtype bf16 --seed 1 --out "$BF16"
TAG=${ISA:-native}-$PRESET
COMMON=(--log-level info --seed 1 --threads "$THREADS" --max-model-len 1024)

probe() { "$BIN/bench_probes" --benchmark_format=json > "$WORK/$1.probe.json" 2> /dev/null; }
for t in $TYPES; do
  f="$WORK/$PRESET-$t.gguf"   # TYPES may name BF16: the unquantized file itself
  [ "$t" = BF16 ] && f="$BF16"
  [ -f "$f" ] || "$LLAMA/llama-quantize" "$BF16" "$f" "$t" > "$WORK/quantize-$t.log" 2>&1
  "$BIN/llmserve" inspect "$f" --json > "$WORK/$PRESET-$t.inspect.json" 2> /dev/null
  for i in $(seq 1 "$REPEAT"); do
    probe "$t.$TAG.$i"
    # llama.cpp: pp512 and tg128 (llama-bench's own repetitions, mean of 3).
    "$LLAMA/llama-bench" -m "$f" -t "$THREADS" -p 512 -n 128 -r 3 -o json \
      > "$WORK/$t.$TAG.$i.llama.json" 2> "$WORK/$t.$TAG.$i.llama.log"
    # llmserve: one stream, 16 prompt + 128 generated tokens (decode = 1 / TPOT), and one
    # 512-token prompt (prefill = 512 / TTFT).
    # The decode row's roofline: bench --roofline probes the bandwidth in the same process just
    # before and just after the timed decode (this shared machine's bandwidth moves 35-65 GB/s
    # between phases of a session, within seconds).
    LLMSERVE_ISA=$ISA "$BIN/llmserve" bench "$f" "${COMMON[@]}" --num-prompts 1 --input-len 16 \
      --output-len 128 --roofline --json > "$WORK/$t.$TAG.$i.decode.json" 2> "$WORK/$t.$TAG.$i.decode.log"
    LLMSERVE_ISA=$ISA "$BIN/llmserve" bench "$f" "${COMMON[@]}" --num-prompts 1 --input-len 512 \
      --output-len 1 --json > "$WORK/$t.$TAG.$i.prefill.json" 2> "$WORK/$t.$TAG.$i.prefill.log"
  done
done

if [ "${SERVE32:-0}" = 1 ]; then
  f="$WORK/$PRESET-Q4_K_M.gguf"
  CLIENT=(--num-prompts 32 --input-len 130 --output-len 64 --seed 1 --json)
  for i in $(seq 1 "$REPEAT"); do
    probe "serve32.$TAG.$i"
    LLMSERVE_ISA=$ISA "$BIN/llmserve" serve "$f" --port 18431 --threads "$THREADS" \
      --max-model-len 1024 --log-level warn > "$WORK/serve32.$i.ours.log" 2>&1 &
    pid=$!
    until curl -sf http://127.0.0.1:18431/health > /dev/null; do sleep 0.5; done
    "$BIN/llmserve" bench serve --url http://127.0.0.1:18431 "${CLIENT[@]}" \
      > "$WORK/serve32.$TAG.$i.ours.json" 2> /dev/null
    kill -TERM $pid; wait $pid || true
    # llama-server: 32 slots of 256 tokens each (130 + 64 fit), continuous batching (default).
    "$LLAMA/llama-server" -m "$f" --port 18432 -t "$THREADS" -np 32 -c 8192 \
      > "$WORK/serve32.$i.llama.log" 2>&1 &
    pid=$!
    until curl -sf http://127.0.0.1:18432/health > /dev/null; do sleep 0.5; done
    "$BIN/llmserve" bench serve --url http://127.0.0.1:18432 "${CLIENT[@]}" \
      > "$WORK/serve32.$TAG.$i.llama.json" 2> /dev/null
    kill -TERM $pid; wait $pid || true
  done
fi

python3 - "$WORK" "$REPEAT" "$TAG" "$TYPES" "${SERVE32:-0}" "$PRESET" <<'PY'
import json, statistics, sys
work, repeat, tag, types, serve32, preset = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(), sys.argv[5] == "1", sys.argv[6]
med = statistics.median
def probe(name):
    p = json.load(open(f"{work}/{name}.probe.json"))["benchmarks"][0]
    return p["read_GBps"]
print(f"{preset}, ISA {tag[: -len(preset) - 1]}; each cell: median of {repeat} runs (min-max)")
print("| file | MB read / token | llama.cpp tg128 | llmserve decode | ratio | roofline (probes beside decode) | llmserve % of roofline | llama.cpp pp512 | llmserve pp512 | ratio |")
print("|---|---|---|---|---|---|---|---|---|---|")
for t in types:
    bpt = json.load(open(f"{work}/{preset}-{t}.inspect.json"))["decode_bytes_per_token"]
    rows = []
    for i in range(1, repeat + 1):
        ll = json.load(open(f"{work}/{t}.{tag}.{i}.llama.json"))
        lpp = next(r["avg_ts"] for r in ll if r["n_prompt"] > 0 and r["n_gen"] == 0)
        ltg = next(r["avg_ts"] for r in ll if r["n_gen"] > 0 and r["n_prompt"] == 0)
        d = json.load(open(f"{work}/{t}.{tag}.{i}.decode.json"))
        p = json.load(open(f"{work}/{t}.{tag}.{i}.prefill.json"))
        tg = 1e3 / d["tpot_ms"]["median"]
        pp = 512 / (p["ttft_ms"]["median"] / 1e3)
        roof = d["decode_roofline"]["roofline_tok_s"]  # bench --roofline: probes beside the decode
        rows.append((ltg, tg, tg / ltg, roof, tg / roof, lpp, pp, pp / lpp))
    def cell(k, fmt):
        xs = [r[k] for r in rows]
        return f"{fmt(med(xs))} ({fmt(min(xs))}-{fmt(max(xs))})"
    f1 = lambda x: f"{x:.1f}"; f2 = lambda x: f"{x:.2f}x"; f0 = lambda x: f"{x:.0f}"; pc = lambda x: f"{x:.0%}"
    print(f"| {t} | {bpt/1e6:.1f} | {cell(0,f1)} | {cell(1,f1)} | {cell(2,f2)} | {cell(3,f0)} | {cell(4,pc)} | {cell(5,f0)} | {cell(6,f0)} | {cell(7,f2)} |")
if serve32:
    print()
    print("| 32 requests (130 in, 64 out), Q4_K_M | output tok/s | TTFT p50 (s) | TPOT p50 (ms) |")
    print("|---|---|---|---|")
    for who in ("ours", "llama"):
        rs = [json.load(open(f"{work}/serve32.{tag}.{i}.{who}.json")) for i in range(1, repeat + 1)]
        name = "llmserve serve" if who == "ours" else "llama-server -np 32"
        print(f"| {name} | " + " / ".join(f"{r['output_throughput']:.1f}" for r in rs) + " | " +
              " / ".join(f"{r['ttft_ms']['median']/1e3:.2f}" for r in rs) + " | " +
              " / ".join(f"{r['tpot_ms']['median']:.0f}" for r in rs) + " |")
PY
