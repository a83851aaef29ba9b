#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang + ASan + UBSan) and fuzzes them. docs/fuzzing.md.
#
#   scripts/fuzz.sh [--build-dir DIR] [--no-build] [TARGET|all] [SECONDS] [-- LIBFUZZER_ARGS...]
#
# TARGET: gguf, safetensors, request, tokenizer, jinja or all (default); SECONDS per target
# (default 60). The build goes to ./build-fuzz unless --build-dir says otherwise. Each target
# starts from its committed seeds (fuzz/corpus/TARGET, never written) plus DIR/corpus/TARGET,
# where new inputs accumulate between runs; a crashing input is saved under
# DIR/crashes/TARGET/ and the script exits 1.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="$ROOT/build-fuzz"
DO_BUILD=1
POS=()
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) BUILD="$(mkdir -p "$2" && cd "$2" && pwd)"; shift 2 ;;
    --no-build) DO_BUILD=0; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n 2,11p "$0"; exit 0 ;;
    *) POS+=("$1"); shift ;;
  esac
done
WHICH="${POS[0]:-all}"
SECONDS_EACH="${POS[1]:-60}"
ALL=(gguf safetensors request tokenizer jinja)
if [ "$WHICH" = all ]; then TARGETS=("${ALL[@]}"); else TARGETS=("$WHICH"); fi

if [ "$DO_BUILD" = 1 ]; then
  CXX="${CXX_FUZZ:-clang++}" cmake -S "$ROOT" -B "$BUILD" -G Ninja -DLLMSERVE_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="${CXX_FUZZ:-clang++}" >/dev/null
  cmake --build "$BUILD" -j "$(nproc)"
fi

status=0
for t in "${TARGETS[@]}"; do
  bin="$BUILD/bin/fuzz_$t"
  seeds="$ROOT/fuzz/corpus/$t"
  if [ ! -x "$bin" ] || [ ! -d "$seeds" ]; then
    echo "fuzz.sh: unknown target '$t' or not built ($bin)" >&2
    exit 2
  fi
  work="$BUILD/corpus/$t"
  crashes="$BUILD/crashes/$t"
  mkdir -p "$work" "$crashes"
  log="$BUILD/fuzz_$t.log"
  echo "fuzz.sh: $t for ${SECONDS_EACH}s (log $log)"
  # -timeout: one input taking > 10 s is a hang; -rss_limit_mb: a bounded parser stays small.
  set +e
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" \
  "$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$crashes/" "${EXTRA[@]}" "$work" "$seeds" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  cov=$(grep -E '^#[0-9]+.*cov:' "$log" | tail -1 | grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9/]*[a-zA-Z]*' || true)
  if [ "$rc" -ne 0 ]; then
    echo "fuzz.sh: $t FAILED (exit $rc); reproducer(s) in $crashes/; log tail:" >&2
    tail -n 60 "$log" >&2
    status=1
  else
    echo "fuzz.sh: $t ok: ${execs:-?} executions, ${cov:-?}"
  fi
done
exit $status
