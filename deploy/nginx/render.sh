#!/usr/bin/env bash
# Renders deploy/nginx/llmserve.conf.template into a runnable nginx.conf.
#
#   render.sh [--affinity] [--listen ADDR:PORT] [--prefix DIR] [--max-fails N]
#             [--fail-timeout 10s] [--read-timeout 3600s] [--max-body 8m] [--tries 3]
#             [--workers auto] [--no-retry-started] REPLICA_ADDR:PORT...  > nginx.conf
#
# --affinity: consistent hash on X-Session-Id instead of least_conn. --no-retry-started: a
# request nginx has sent to a replica is never sent to another (no re-run of a generation that
# may have started; the price: a 429 or 503 goes back to the client, who retries). --prefix: the directory
# nginx is run with (-p); pid, logs and temp files go there (default: the current directory).
# Example (three replicas on one host, then `nginx -p /tmp/lb -c /tmp/lb/nginx.conf`):
#   mkdir -p /tmp/lb && deploy/nginx/render.sh --prefix /tmp/lb --listen 127.0.0.1:8080 \
#     127.0.0.1:8001 127.0.0.1:8002 127.0.0.1:8003 > /tmp/lb/nginx.conf
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
balance="least_conn;"
listen="127.0.0.1:8080"
prefix=$(pwd)
max_fails=1
fail_timeout=10s
read_timeout=3600s
max_body=8m
tries=3
workers=auto
next_upstream="error timeout http_429 http_503 non_idempotent"
servers=()
while [ $# -gt 0 ]; do
  case "$1" in
    --affinity) balance='hash $llmserve_affinity_key consistent;'; shift ;;
    --listen) listen=$2; shift 2 ;;
    --prefix) prefix=$2; shift 2 ;;
    --max-fails) max_fails=$2; shift 2 ;;
    --fail-timeout) fail_timeout=$2; shift 2 ;;
    --read-timeout) read_timeout=$2; shift 2 ;;
    --max-body) max_body=$2; shift 2 ;;
    --tries) tries=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --no-retry-started) next_upstream="error timeout"; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "render.sh: unknown flag $1" >&2; exit 1 ;;
    *) servers+=("$1"); shift ;;
  esac
done
[ ${#servers[@]} -gt 0 ] || { echo "render.sh: give at least one replica ADDR:PORT" >&2; exit 1; }
prefix=$(cd "$prefix" && pwd)

server_lines=""
for s in "${servers[@]}"; do
  server_lines+="    server $s max_fails=$max_fails fail_timeout=$fail_timeout;"$'\n'
done
server_lines=${server_lines%$'\n'}

# Placeholders are replaced literally (bash string replacement: no sed metacharacters).
tpl=$(<"$here/llmserve.conf.template")
tpl=${tpl//@BALANCE@/$balance}
tpl=${tpl//@SERVERS@/$server_lines}
tpl=${tpl//@LISTEN@/$listen}
tpl=${tpl//@PREFIX@/$prefix}
tpl=${tpl//@READ_TIMEOUT@/$read_timeout}
tpl=${tpl//@MAX_BODY@/$max_body}
tpl=${tpl//@TRIES@/$tries}
tpl=${tpl//@WORKERS@/$workers}
tpl=${tpl//@NEXT_UPSTREAM@/$next_upstream}
printf '%s\n' "$tpl"
