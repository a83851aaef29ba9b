#!/usr/bin/env bash
# Quick start: install dependencies, build, and serve the demo model (stories260K) with the
# OpenAI-compatible API. Extra arguments go to `llmserve serve` (e.g. --port 8011).
set -euo pipefail
cd "$(dirname "$0")"
./scripts/install-deps.sh
./scripts/build.sh

HOST=127.0.0.1
PORT=8000
MAX_MODEL_LEN_GIVEN=
KV_SIZE_GIVEN=
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do  # let --host/--port given here win over the defaults
  case "${args[$i]}" in
    --port) PORT="${args[$((i + 1))]:-$PORT}" ;;
    --port=*) PORT="${args[$i]#--port=}" ;;
    --host) HOST="${args[$((i + 1))]:-$HOST}" ;;
    --host=*) HOST="${args[$i]#--host=}" ;;
    --max-model-len|--max-model-len=*) MAX_MODEL_LEN_GIVEN=1 ;;
    --num-kv-blocks|--num-kv-blocks=*|--kv-cache-memory|--kv-cache-memory=*) KV_SIZE_GIVEN=1 ;;
  esac
done
filtered=()
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    --port|--host) i=$((i + 1)) ;;
    --port=*|--host=*) ;;
    *) filtered+=("${args[$i]}") ;;
  esac
done

MODEL=../shared/models/stories260K/stories260K.gguf
cat <<MSG

llmserve is starting on http://$HOST:$PORT (Ctrl-C to stop). Try, in another terminal:

  curl -s http://$HOST:$PORT/v1/completions -H 'Content-Type: application/json' \\
    -d '{"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 64, "temperature": 0}'

  curl -sN http://$HOST:$PORT/v1/completions -H 'Content-Type: application/json' \\
    -d '{"prompt": "Lily and Ben", "max_tokens": 64, "stream": true}'

  Watch the scheduler and the KV blocks live: http://$HOST:$PORT/ui

MSG
# The GGUF declares a 128-token context (converter artefact); the model was trained on 512.
context=(--max-model-len 512)
if [ -n "${MAX_MODEL_LEN_GIVEN:-}" ]; then context=(); fi
# 512 blocks of 16 tokens (16 full 512-token sequences) instead of the 2 GiB default's ~100k
# blocks of this tiny model: the dashboard's block map then fits a screen.
if [ -z "${KV_SIZE_GIVEN:-}" ]; then context+=(--num-kv-blocks 512); fi
exec ./build/bin/llmserve serve "$MODEL" "${context[@]}" --host "$HOST" --port "$PORT" \
  ${filtered[@]+"${filtered[@]}"}
