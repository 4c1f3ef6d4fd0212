#!/usr/bin/env bash
# The broker beside a bare rmcp echo server, in one run (issue 11). Loopback only, a few minutes.
#   bench/run.sh [--rounds 3] [--seconds 5] [--sessions 10000] [--connects 20] [--starts 5]
#                [--memory-only]   (per-session memory alone; no wrk needed)
# Needs wrk (apt-get install -y wrk). Release builds go to $CARGO_TARGET_DIR (default target/).
set -euo pipefail
cd "$(dirname "$0")/.."
case " $* " in
*" --memory-only "*) ;;
*) command -v wrk >/dev/null || { echo "wrk is needed: apt-get install -y wrk" >&2; exit 1; } ;;
esac
cargo build --release --quiet --bin oauth-broker --example echo_server --example mcp_bench
target="${CARGO_TARGET_DIR:-target}/release"
# 10,000 sessions hold 10,000 connections on each side.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec "$target/examples/mcp_bench" --broker "$target/oauth-broker" --echo "$target/examples/echo_server" \
    --script bench/mcp.lua "$@"
