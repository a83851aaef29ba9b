#!/usr/bin/env bash
# Driver of the dashboard's real-browser tests (registered by tests/ui/CMakeLists.txt;
# docs/ui.md). Headless Debian Chromium (/usr/bin/chromium, or $CHROMIUM) driven by
# puppeteer-core runs ui_browser.test.mjs (next to this script) against a server:
#
#   ui_browser_e2e.sh install WORK_DIR
#       WORK_DIR holds package.json + package-lock.json (ui/'s, copied there at configure
#       time); runs `npm ci` there unless node_modules already matches the lock file.
#   ui_browser_e2e.sh run WORK_DIR LLMSERVE_BIN MODEL [serve flags...]
#       starts `LLMSERVE_BIN serve MODEL [flags] --host 127.0.0.1 --port 0 --api-key KEY`,
#       waits for GET /health, runs the test with LLMSERVE_URL and LLMSERVE_API_KEY set, and
#       stops the server whatever happens.
#   ui_browser_e2e.sh mock WORK_DIR UI_DIR [mock flags...]
#       the same test against UI_DIR/test/mock_server.mjs (the page without the C++ server).
#
# UI_SCREENSHOT_DIR, when set, receives the test's screenshots. For a developer, ui/ itself
# can be WORK_DIR once `npm ci` ran there: tests/ui/ui_browser_e2e.sh mock ui ui
set -euo pipefail

die() { echo "ui_browser_e2e: $*" >&2; exit 1; }
# shellcheck source=../e2e_common.sh
. "$(dirname "${BASH_SOURCE[0]}")/../e2e_common.sh"
here=$(cd "$(dirname "$0")" && pwd)

e2e_require_node

mode=${1:-}
work=${2:-}
[ -n "$mode" ] && [ -d "$work" ] || die "usage: $0 install|run|mock WORK_DIR ..."
work=$(cd "$work" && pwd)
shift 2

if [ "$mode" = install ]; then
  e2e_npm_install "$work" ui_browser_e2e
  exit 0
fi

chromium=${CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] || die "no Chromium at $chromium; run scripts/install-deps.sh (Debian package 'chromium')"
[ -d "$work/node_modules/puppeteer-core" ] || die "$work/node_modules/puppeteer-core missing; run '$0 install $work'"
# The test resolves puppeteer-core from WORK_DIR/node_modules: run a copy from inside WORK_DIR.
mkdir -p "$work/e2e-test"
cp "$here/ui_browser.test.mjs" "$work/e2e-test/ui_browser.test.mjs"

log=$(mktemp "${TMPDIR:-/tmp}/llmserve_ui_e2e.XXXXXX")

api_key="ui-e2e-$RANDOM-$RANDOM"
case "$mode" in
  run)
    [ $# -ge 2 ] || die "usage: $0 run WORK_DIR LLMSERVE_BIN MODEL [serve flags...]"
    bin=$1
    shift
    [ -x "$bin" ] || die "llmserve binary '$bin' not found"
    # Until serve has the dashboard (issue 18: --disable-ui comes with it) there is nothing to
    # test: exit 77, which tests/ui/CMakeLists.txt declares as "skipped".
    if ! "$bin" serve --help 2>/dev/null | grep -q -- '--disable-ui'; then
      echo "ui_browser_e2e: 'serve' has no dashboard (no --disable-ui flag); skipped"
      exit 77
    fi
    # The key is the one passed here: never an LLMSERVE_API_KEY from the environment.
    e2e_start_server "$log" env -u LLMSERVE_API_KEY "$bin" serve "$@" --host 127.0.0.1 \
      --port 0 --api-key "$api_key"
    ;;
  mock)
    [ $# -ge 1 ] || die "usage: $0 mock WORK_DIR UI_DIR [mock flags...]"
    ui_dir=$(cd "$1" && pwd)
    shift
    [ -f "$ui_dir/test/mock_server.mjs" ] || die "$ui_dir/test/mock_server.mjs not found"
    e2e_start_server "$log" node "$ui_dir/test/mock_server.mjs" --ui-dir "$ui_dir" --port 0 \
      --api-key "$api_key" "$@"
    ;;
  proxy)
    # For developers: the test against a running `llmserve serve --api-key KEY` at URL, with
    # the page's files from UI_DIR (no rebuild); the key comes from $LLMSERVE_API_KEY.
    [ $# -ge 2 ] || die "usage: LLMSERVE_API_KEY=KEY $0 proxy WORK_DIR UI_DIR URL"
    ui_dir=$(cd "$1" && pwd)
    api_key=${LLMSERVE_API_KEY:-}
    e2e_start_server "$log" node "$ui_dir/test/mock_server.mjs" --ui-dir "$ui_dir" --port 0 \
      --api-key "$api_key" --upstream "$2"
    ;;
  *) die "unknown mode '$mode'" ;;
esac

# Both log "... on http://127.0.0.1:PORT" once the socket is bound.
e2e_wait_url "$log"

status=0
LLMSERVE_URL="$url" LLMSERVE_API_KEY="$api_key" CHROMIUM="$chromium" \
  timeout 240 node --test --test-concurrency=1 "$work/e2e-test/ui_browser.test.mjs" || status=$?
if [ "$status" -ne 0 ]; then
  echo "---- server log (tail) ----" >&2
  tail -n 50 "$log" >&2
fi
exit "$status"
