# Shared by the shell drivers of the end-to-end tests (tests/server/openai_client/,
# tests/ui/, tests/deploy/): sourced, after the driver defined die() (one line to stderr,
# exit 1). Provides:
#   e2e_require_node             node and npm present, Node.js >= 18
#   e2e_npm_install WORK NAME    `npm ci` in WORK unless node_modules matches its lock file
#   e2e_start_server LOG CMD...  runs CMD (a `serve ... --port 0`) in the background, logging
#                                to LOG; sets server_pid, starts a watchdog that kills it
#                                if the driver is killed outright (ctest's timeout), and
#                                installs an EXIT trap stopping both and removing LOG
#   e2e_wait_url LOG             waits for serve's "... on http://127.0.0.1:PORT" log line
#                                and a 200 from GET /health; sets url

e2e_require_node() {
  local tool
  for tool in node npm; do
    command -v "$tool" >/dev/null || die "'$tool' not found; run scripts/install-deps.sh"
  done
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$major" -ge 18 ] || die "Node.js >= 18 needed, found $(node --version)"
}

e2e_npm_install() {
  local work=$1 name=$2
  local stamp="$work/node_modules/.llmserve-lock-stamp"
  if [ -f "$stamp" ] && cmp -s "$stamp" "$work/package-lock.json"; then
    echo "$name: node_modules up to date"
    return 0
  fi
  # --prefer-offline: the npm cache answers when it has the tarball; the registry otherwise.
  # --ignore-scripts: no package needs an install script (puppeteer-core downloads nothing:
  # it drives the system Chromium).
  npm ci --prefix "$work" --prefer-offline --no-audit --no-fund --ignore-scripts --loglevel=error
  cp "$work/package-lock.json" "$stamp"
}

server_pid=""
watchdog_pid=""
e2e_log=""
e2e_cleanup() {
  if [ -n "$watchdog_pid" ]; then kill "$watchdog_pid" 2>/dev/null || true; fi
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ -n "$e2e_log" ]; then rm -f "$e2e_log"; fi
}

e2e_start_server() {
  e2e_log=$1
  shift
  trap e2e_cleanup EXIT
  "$@" >"$e2e_log" 2>&1 &
  server_pid=$!
  local driver_pid=$$
  ( while kill -0 "$driver_pid" 2>/dev/null; do sleep 1; done
    kill -KILL "$server_pid" 2>/dev/null ) >/dev/null 2>&1 &
  watchdog_pid=$!
}

e2e_wait_url() {
  local log=$1 port=""
  for _ in $(seq 600); do  # up to 60 s
    kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; die "the server exited before serving"; }
    port=$(sed -n 's|.*on http://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' "$log" | head -n1)
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$log" >&2; die "the server did not report its port within 60 s"; }
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
}
