#!/usr/bin/env bash
# Installs every Debian package llmserve's build, tests and benchmarks need.
# Idempotent: packages already present are skipped by apt-get. Run as root (or with sudo).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libcpp-httplib-dev    # HTTP server/client + SSE (cpp-httplib)
  nlohmann-json3-dev    # JSON
  libpcre2-dev          # tokenizer pre-tokenizer regexes (PCRE2, UTF + UCP)
  libutf8proc-dev       # tokenizer NFC normalizer (tokenizer.json)
  libxxhash-dev         # prefix caching: XXH3-128 block hashes (kv_cache/block_hash.h)
  libcli11-dev          # command-line parsing
  libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev      # Google Benchmark (bench/)
  libdnnl-dev           # oneDNN: comparator for bench_gemm (measured against our own GEMM kernels)
  curl                  # run.sh prints/uses a curl example; tests do not need it
  clang libclang-rt-14-dev  # libFuzzer targets (fuzz/, docs/fuzzing.md): clang 14 + its fuzzer/ASan runtimes
  nginx                 # deploy/nginx/: the load balancer in front of replicas (tests/deploy)
  haproxy               # deploy/haproxy/: its config is checked with haproxy -c (tests/deploy)
  chromium              # the dashboard's browser tests (tests/ui): headless, driven by puppeteer-core
)

# Node.js + npm for the `openai` npm client end-to-end test (tests/server/openai_client/):
# Debian's packages, only when the commands are absent, so a newer Node.js already on the
# machine (e.g. NodeSource's, which bundles npm) is kept, never downgraded.
if ! command -v node >/dev/null 2>&1; then
  PACKAGES+=(nodejs)
fi
if ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(npm)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
