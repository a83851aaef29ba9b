#!/usr/bin/env bash
# Quick start: install dependencies, build, and serve the demo model (stories260K) on
# 127.0.0.1:8000 with the OpenAI-compatible API. Extra arguments go to `llmserve serve`.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/install-deps.sh
./scripts/build.sh

MODEL=../shared/models/stories260K/stories260K.gguf
cat <<MSG

llmserve is starting on http://127.0.0.1:8000 (Ctrl-C to stop). Try, in another terminal:

  curl -s http://127.0.0.1:8000/v1/completions -H 'Content-Type: application/json' \\
    -d '{"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 64, "temperature": 0}'

  curl -sN http://127.0.0.1:8000/v1/completions -H 'Content-Type: application/json' \\
    -d '{"prompt": "Lily and Ben", "max_tokens": 64, "stream": true}'

MSG
# The GGUF declares a 128-token context (converter artefact); the model was trained on 512.
exec ./build/bin/llmserve serve "$MODEL" --max-model-len 512 --host 127.0.0.1 --port 8000 "$@"
