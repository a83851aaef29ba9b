#!/usr/bin/env bash
# Driver of the deployment end-to-end tests (registered by tests/deploy/CMakeLists.txt).
#
#   deploy_e2e.sh install WORK_DIR
#       `npm ci` in WORK_DIR (package.json + package-lock.json copied there at configure time)
#       unless node_modules already matches the lock file.
#   deploy_e2e.sh manifests WORK_DIR DEPLOY_DIR
#       validates deploy/: `nginx -t` on both rendered nginx configs, `haproxy -c` on the
#       HAProxy config, `systemd-analyze verify` on the unit when systemd is there, and
#       manifests.test.mjs (Kubernetes schemas, Prometheus / Grafana structure).
#   deploy_e2e.sh run WORK_DIR DEPLOY_DIR LLMSERVE_BIN MODEL [serve flags...]
#       starts 3 replicas (`serve MODEL [flags] --port 0 --replica-id rN`) and two nginx
#       instances rendered from deploy/nginx/llmserve.conf.template (least_conn, and
#       consistent hash on X-Session-Id), then runs `node --test` on lb.test.mjs, which kills,
#       drains and restarts replicas itself. Everything is stopped whatever happens; all
#       state lives in one temporary directory (works as root and as any other user).
set -euo pipefail

die() { echo "deploy_e2e: $*" >&2; exit 1; }

# shellcheck source=../e2e_common.sh
. "$(dirname "${BASH_SOURCE[0]}")/../e2e_common.sh"
e2e_require_node

mode=${1:-}
work=${2:-}
[ -n "$mode" ] && [ -d "$work" ] || die "usage: $0 install|manifests|run WORK_DIR ..."
shift 2

if [ "$mode" = install ]; then
  e2e_npm_install "$work" deploy_e2e
  exit 0
fi

deploy=${1:-}
[ -d "$deploy/nginx" ] || die "deploy directory '$deploy' has no nginx/"
shift
[ -d "$work/node_modules/openai" ] || die "$work/node_modules missing; run '$0 install $work'"

NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
[ -x "$NGINX" ] || die "nginx not found; run scripts/install-deps.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/llmserve_deploy.XXXXXX")
# nginx's worker processes run as 'nobody' when started as root: they must reach the prefix.
chmod 755 "$tmp"
mkdir -p "$tmp/pids"
watchdog_pid=""
cleanup() {
  local status=$?
  if [ -n "$watchdog_pid" ]; then kill "$watchdog_pid" 2>/dev/null || true; fi
  for f in "$tmp"/pids/*; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || true
  done
  for f in "$tmp"/pids/*; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [ "$status" -ne 0 ] && [ -z "${KEEP_TMP:-}" ]; then
    for f in "$tmp"/*.log "$tmp"/lb*/error.log; do
      [ -f "$f" ] || continue
      echo "---- $f (tail) ----" >&2
      tail -n 20 "$f" >&2
    done
  fi
  [ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
# If this script is killed outright (ctest's timeout), the EXIT trap does not run: a watchdog
# takes every process recorded under pids/ down with it.
driver_pid=$$
( while kill -0 "$driver_pid" 2>/dev/null; do sleep 1; done
  for f in "$tmp"/pids/*; do kill -KILL "$(cat "$f")" 2>/dev/null; done
  rm -rf "$tmp" ) >/dev/null 2>&1 &
watchdog_pid=$!

free_port() {
  node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# render NAME PORT [render.sh flags...] -> $tmp/NAME/nginx.conf, checked with nginx -t
render() {
  local name=$1 port=$2
  shift 2
  mkdir -p "$tmp/$name"
  "$deploy/nginx/render.sh" --prefix "$tmp/$name" --listen "127.0.0.1:$port" --workers 2 "$@" \
    >"$tmp/$name/nginx.conf"
  "$NGINX" -t -q -p "$tmp/$name" -e "$tmp/$name/error.log" -c "$tmp/$name/nginx.conf" ||
    die "nginx -t failed on $tmp/$name/nginx.conf"
}

if [ "$mode" = manifests ]; then
  render lb 18080 127.0.0.1:18001 127.0.0.1:18002 127.0.0.1:18003
  render lb_affinity 18081 --affinity 127.0.0.1:18001 127.0.0.1:18002 127.0.0.1:18003
  render lb_strict 18082 --no-retry-started 127.0.0.1:18001 127.0.0.1:18002
  grep -q "proxy_next_upstream error timeout;" "$tmp/lb_strict/nginx.conf" ||
    die "--no-retry-started did not render 'proxy_next_upstream error timeout;'"
  echo "deploy_e2e: nginx -t ok (least_conn, affinity, --no-retry-started)"
  if command -v haproxy >/dev/null 2>&1; then
    haproxy -c -q -f "$deploy/haproxy/haproxy.cfg" || die "haproxy -c failed"
    echo "deploy_e2e: haproxy -c ok"
  else
    echo "deploy_e2e: haproxy not installed; its config is not checked"
  fi
  if command -v systemd-analyze >/dev/null 2>&1; then
    # Warnings about the missing binary path are expected outside an installed system.
    systemd-analyze verify "$deploy/systemd/llmserve@.service" 2>&1 | grep -v "Command .* is not executable\|No such file" || true
  fi
  DEPLOY_DIR="$deploy" timeout 120 node --test "$work/manifests.test.mjs"
  exit $?
fi

[ "$mode" = run ] || die "unknown mode '$mode'"
[ $# -ge 2 ] || die "usage: $0 run WORK_DIR DEPLOY_DIR LLMSERVE_BIN MODEL [serve flags...]"
bin=$1
model=$2
shift 2
[ -x "$bin" ] || die "llmserve binary '$bin' not found"
serve_args=("$model" "$@")

# start_replica ID PORT: serve on PORT (0 = any), pid in pids/ID, log in ID.log
start_replica() {
  local id=$1 port=$2
  env -u LLMSERVE_API_KEY "$bin" serve "${serve_args[@]}" --host 127.0.0.1 --port "$port" \
    --replica-id "$id" >"$tmp/$id.log" 2>&1 &
  echo $! >"$tmp/pids/$id"
}
replica_port() {  # ID -> the port its log reports once bound
  local id=$1 port=""
  for _ in $(seq 600); do
    kill -0 "$(cat "$tmp/pids/$id")" 2>/dev/null || { cat "$tmp/$id.log" >&2; die "$id exited"; }
    port=$(sed -n 's|.*on http://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' "$tmp/$id.log" | head -n1)
    [ -n "$port" ] && { echo "$port"; return; }
    sleep 0.1
  done
  die "$id did not report its port within 60 s"
}

ids=(r0 r1 r2)
for id in "${ids[@]}"; do start_replica "$id" 0; done
ports=()
replicas_json="["
for id in "${ids[@]}"; do
  p=$(replica_port "$id")
  ports+=("$p")
  replicas_json+="{\"id\":\"$id\",\"port\":$p},"
done
replicas_json="${replicas_json%,}]"

upstreams=()
for p in "${ports[@]}"; do upstreams+=("127.0.0.1:$p"); done
lb_port=$(free_port)
aff_port=$(free_port)
# fail_timeout 2s: a killed replica is retried (and seen back) within seconds in the test.
render lb "$lb_port" --fail-timeout 2s "${upstreams[@]}"
render lb_affinity "$aff_port" --affinity --fail-timeout 2s "${upstreams[@]}"
for name in lb lb_affinity; do
  "$NGINX" -p "$tmp/$name" -e "$tmp/$name/error.log" -c "$tmp/$name/nginx.conf" \
    -g 'daemon off;' >"$tmp/$name.log" 2>&1 &
  echo $! >"$tmp/pids/nginx_$name"
done

status=0
LB_URL="http://127.0.0.1:$lb_port" LB_AFFINITY_URL="http://127.0.0.1:$aff_port" \
  REPLICAS="$replicas_json" PIDS_DIR="$tmp/pids" LOG_DIR="$tmp" LLMSERVE_BIN="$bin" \
  DEPLOY_DIR="$deploy" NGINX="$NGINX" HAPROXY="$(command -v haproxy || echo /usr/sbin/haproxy)" \
  SERVE_ARGS="$(node -e 'console.log(JSON.stringify(process.argv.slice(1)))' -- "${serve_args[@]}")" \
  timeout 150 node --test --test-timeout=60000 "$work/lb.test.mjs" || status=$?
if [ "$status" -ne 0 ]; then
  echo "---- nginx access log (tail) ----" >&2
  tail -n 30 "$tmp/lb/access.log" >&2 || true
fi
exit "$status"
