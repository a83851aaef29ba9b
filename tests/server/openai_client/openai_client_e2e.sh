#!/usr/bin/env bash
# Driver of the `openai` npm client end-to-end test (registered by tests/server/CMakeLists.txt).
#
#   openai_client_e2e.sh install WORK_DIR
#       WORK_DIR holds package.json + package-lock.json (copied from this folder at configure
#       time); runs `npm ci` there unless node_modules already matches the lock file.
#   openai_client_e2e.sh run WORK_DIR LLMSERVE_BIN MODEL [serve flags...]
#       starts `LLMSERVE_BIN serve MODEL [flags] --host 127.0.0.1 --port 0` (with --api-key
#       when serve has the flag), waits for GET /health, runs `node --test` on
#       WORK_DIR/openai_client.test.mjs with LLMSERVE_URL (and LLMSERVE_API_KEY) set, and
#       stops the server whatever happens.
# Node.js and npm are required: without them this fails (test.sh installs them).
set -euo pipefail

die() { echo "openai_client_e2e: $*" >&2; exit 1; }
# shellcheck source=../../e2e_common.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../e2e_common.sh"
e2e_require_node

mode=${1:-}
work=${2:-}
[ -n "$mode" ] && [ -d "$work" ] || die "usage: $0 install|run WORK_DIR ..."
shift 2

if [ "$mode" = install ]; then
  e2e_npm_install "$work" openai_client_e2e
  exit 0
fi

[ "$mode" = run ] || die "unknown mode '$mode'"
[ $# -ge 2 ] || die "usage: $0 run WORK_DIR LLMSERVE_BIN MODEL [serve flags...]"
bin=$1
shift
[ -x "$bin" ] || die "llmserve binary '$bin' not found"
[ -d "$work/node_modules/openai" ] || die "$work/node_modules/openai missing; run '$0 install $work'"

log=$(mktemp "${TMPDIR:-/tmp}/llmserve_openai_e2e.XXXXXX")

api_key=""
if "$bin" serve --help 2>/dev/null | grep -q -- '--api-key'; then
  api_key="e2e-$RANDOM-$RANDOM"
  set -- "$@" --api-key "$api_key"
else
  echo "openai_client_e2e: 'serve' has no --api-key flag; the API key test is skipped"
fi

# The key is the one passed above or none: never an LLMSERVE_API_KEY from the environment.
e2e_start_server "$log" env -u LLMSERVE_API_KEY "$bin" serve "$@" --host 127.0.0.1 --port 0
# serve logs "serving model '...' on http://127.0.0.1:PORT" once the socket is bound.
e2e_wait_url "$log"

status=0
LLMSERVE_URL="$url" LLMSERVE_API_KEY="$api_key" \
  timeout 240 node --test "$work/${LLMSERVE_E2E_TEST:-openai_client.test.mjs}" || status=$?
if [ "$status" -ne 0 ]; then
  echo "---- llmserve serve log (tail) ----" >&2
  tail -n 50 "$log" >&2
fi
exit "$status"
