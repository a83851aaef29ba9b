#!/usr/bin/env bash
# Builds scripts/references/llamacpp_logits.cpp against a llama.cpp peer checkout
# and dumps llama.cpp's logits for the `short` and `long` token sequences of
# ../shared/testdata/models/synthetic/sequences.json (relative to the repository
# root) for each model given as an argument. Not run by CI.
#
# For each MODEL (a model.gguf file, or a directory holding model.gguf) it writes
#   llamacpp_logits_short.npy, llamacpp_logits_long.npy   float32 [T, n_vocab]
# beside the model.gguf, or, when OUT_DIR is set, into $OUT_DIR/<model dir name>/.
# llama.cpp runs CPU only, flash attention off, F32 KV cache, one batch, 2 threads.
#
# Environment:
#   LLAMA_DIR   llama.cpp source dir, built with CMake -DBUILD_SHARED_LIBS=ON
#               into $LLAMA_DIR/build        (default /work/peers/llama.cpp)
#   TOOL        where to put the built tool  (default /tmp/llamacpp_logits)
#   SEQUENCES   token sequences JSON         (default ../shared/testdata/models/synthetic/sequences.json)
#   OUT_DIR     write outputs here instead of beside each model (optional)
#
# Usage:
#   scripts/references/llamacpp_reference.sh path/to/model.gguf [more models...]
#   OUT_DIR=/tmp/ref scripts/references/llamacpp_reference.sh ../shared/testdata/models/synthetic/qwen3-qknorm
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
LLAMA_DIR="${LLAMA_DIR:-/work/peers/llama.cpp}"
TOOL="${TOOL:-/tmp/llamacpp_logits}"
SEQUENCES="${SEQUENCES:-$REPO_ROOT/../shared/testdata/models/synthetic/sequences.json}"
PY=/usr/bin/python3

if [ "$#" -lt 1 ]; then
    echo "usage: $0 MODEL.gguf|MODEL_DIR [...]" >&2
    exit 2
fi

# The shared libraries are in build/bin for llama.cpp's CMake build; fall back to
# wherever libllama.so actually is.
LIB_DIR="$LLAMA_DIR/build/bin"
if [ ! -e "$LIB_DIR/libllama.so" ]; then
    found="$(find "$LLAMA_DIR/build" -name 'libllama.so' -print -quit 2>/dev/null || true)"
    if [ -z "$found" ]; then
        echo "error: libllama.so not found under $LLAMA_DIR/build (build llama.cpp with -DBUILD_SHARED_LIBS=ON)" >&2
        exit 1
    fi
    LIB_DIR="$(dirname "$found")"
fi

echo "building $TOOL against $LLAMA_DIR (libs in $LIB_DIR)" >&2
g++ -std=c++17 -O2 \
    -I"$LLAMA_DIR/include" -I"$LLAMA_DIR/ggml/include" \
    "$REPO_ROOT/scripts/references/llamacpp_logits.cpp" \
    -L"$LIB_DIR" -lllama -lggml -lggml-base \
    -Wl,-rpath,"$LIB_DIR" -o "$TOOL"

seq_ids() { # $1 = sequence name -> comma-separated ids
    "$PY" -c 'import json,sys; print(",".join(str(int(t)) for t in json.load(open(sys.argv[1]))[sys.argv[2]]))' \
        "$SEQUENCES" "$1"
}
SHORT_IDS="$(seq_ids short)"
LONG_IDS="$(seq_ids long)"

for m in "$@"; do
    if [ -d "$m" ]; then
        gguf="$m/model.gguf"
    else
        gguf="$m"
    fi
    if [ ! -f "$gguf" ]; then
        echo "error: $gguf not found" >&2
        exit 1
    fi
    model_dir="$(cd "$(dirname "$gguf")" && pwd)"
    if [ -n "${OUT_DIR:-}" ]; then
        dest="$OUT_DIR/$(basename "$model_dir")"
        mkdir -p "$dest"
    else
        dest="$model_dir"
    fi
    "$TOOL" "$gguf" "$dest/llamacpp_logits_short.npy" "$SHORT_IDS"
    "$TOOL" "$gguf" "$dest/llamacpp_logits_long.npy"  "$LONG_IDS"
done
