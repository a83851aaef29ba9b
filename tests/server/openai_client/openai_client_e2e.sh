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

for tool in node npm; do
  command -v "$tool" >/dev/null || die "'$tool' not found; run scripts/install-deps.sh"
done
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 18 ] || die "Node.js >= 18 needed, found $(node --version)"

mode=${1:-}
work=${2:-}
[ -n "$mode" ] && [ -d "$work" ] || die "usage: $0 install|run WORK_DIR ..."
shift 2

if [ "$mode" = install ]; then
  stamp="$work/node_modules/.llmserve-lock-stamp"
  if [ -f "$stamp" ] && cmp -s "$stamp" "$work/package-lock.json"; then
    echo "openai_client_e2e: node_modules up to date"
    exit 0
  fi
  # --prefer-offline: the npm cache answers when it has the tarball; the registry otherwise.
  npm ci --prefix "$work" --prefer-offline --no-audit --no-fund --ignore-scripts
  cp "$work/package-lock.json" "$stamp"
  exit 0
fi

[ "$mode" = run ] || die "unknown mode '$mode'"
[ $# -ge 2 ] || die "usage: $0 run WORK_DIR LLMSERVE_BIN MODEL [serve flags...]"
bin=$1
shift
[ -x "$bin" ] || die "llmserve binary '$bin' not found"
[ -d "$work/node_modules/openai" ] || die "$work/node_modules/openai missing; run '$0 install $work'"

log=$(mktemp "${TMPDIR:-/tmp}/llmserve_openai_e2e.XXXXXX")
server_pid=""
watchdog_pid=""
cleanup() {
  if [ -n "$watchdog_pid" ]; then kill "$watchdog_pid" 2>/dev/null || true; fi
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -f "$log"
}
trap cleanup EXIT

api_key=""
if "$bin" serve --help 2>/dev/null | grep -q -- '--api-key'; then
  api_key="e2e-$RANDOM-$RANDOM"
  set -- "$@" --api-key "$api_key"
else
  echo "openai_client_e2e: 'serve' has no --api-key flag; the API key test is skipped"
fi

# The key is the one passed above or none: never an LLMSERVE_API_KEY from the environment.
env -u LLMSERVE_API_KEY "$bin" serve "$@" --host 127.0.0.1 --port 0 >"$log" 2>&1 &
server_pid=$!
# If this script is killed outright (ctest's timeout), the EXIT trap does not run: a watchdog
# takes the server down with it.
driver_pid=$$
( while kill -0 "$driver_pid" 2>/dev/null; do sleep 1; done
  kill -KILL "$server_pid" 2>/dev/null ) >/dev/null 2>&1 &
watchdog_pid=$!

# serve logs "serving model '...' on http://127.0.0.1:PORT" once the socket is bound.
port=""
for _ in $(seq 600); do  # up to 60 s
  kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; die "serve exited before serving"; }
  port=$(sed -n 's|.*on http://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' "$log" | head -n1)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$log" >&2; die "serve did not report its port within 60 s"; }
url="http://127.0.0.1:$port"

node --input-type=module -e '
  const url = process.argv[1];
  for (let i = 0; i < 300; ++i) {
    try { if ((await fetch(url + "/health")).status === 200) process.exit(0); } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  console.error("no 200 from " + url + "/health within 30 s");
  process.exit(1);
' "$url" || { cat "$log" >&2; die "server not healthy"; }

status=0
LLMSERVE_URL="$url" LLMSERVE_API_KEY="$api_key" \
  timeout 240 node --test "$work/${LLMSERVE_E2E_TEST:-openai_client.test.mjs}" || status=$?
if [ "$status" -ne 0 ]; then
  echo "---- llmserve serve log (tail) ----" >&2
  tail -n 50 "$log" >&2
fi
exit "$status"
