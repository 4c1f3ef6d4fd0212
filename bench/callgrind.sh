#!/usr/bin/env bash
# Instructions per tools/call in the release broker, under callgrind, at 1 and at 64 sessions
# (issue 11: what a call costs as sessions grow). Counters are zeroed after a warm-up, then wrk
# drives `bench/mcp.lua` for a fixed time; instructions / requests answered = Ir per call, less
# what the server does while idle in that time (the broker's background tasks: the cache watcher
# reads the database every 50 ms, timers), measured first with no load: under valgrind the call
# rate follows the machine's load, so that share per call would move with it.
#   bench/callgrind.sh BROKER_BINARY [TOOL=list_connections] [SECONDS=20]
#   bench/callgrind.sh --echo ECHO_BINARY [SECONDS=20]   (the bare rmcp echo server, measured
#       the same way, with the `echo` tool: the baseline the broker's figures compare with)
# Prints one line per session count; callgrind.out.* files stay in a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
echo_mode=0
if [[ "${1:-}" == "--echo" ]]; then
  echo_mode=1
  shift
fi
server="$(realpath "$1")"
if [[ $echo_mode -eq 1 ]]; then
  tool=echo
  seconds="${2:-20}"
  args='{"text":"hello"}'
else
  tool="${2:-list_connections}"
  seconds="${3:-20}"
  args='{}'
fi
[[ "$tool" == provider_request ]] && { echo "provider_request needs a connected grant: use list_connections" >&2; exit 2; }
dir="$(mktemp -d /tmp/oauth-broker-callgrind.XXXXXX)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
base="http://127.0.0.1:$port"
server_args=(--listen "127.0.0.1:$port")
[[ $echo_mode -eq 1 ]] || server_args=(serve --demo "${server_args[@]}" --data-dir "$dir/data")
valgrind --tool=callgrind --compress-strings=no --callgrind-out-file="$dir/callgrind.out.%p" "$server" "${server_args[@]}" \
  >"$dir/stdout" 2>"$dir/log" &
vg=$!
trap 'kill $vg 2>/dev/null || true' EXIT
if [[ $echo_mode -eq 1 ]]; then
  # The echo server has no readiness route: it prints its address once it listens.
  until grep -q '^listening on ' "$dir/stdout" 2>/dev/null; do sleep 0.5; done
  token=""
else
  until curl -fs "$base/readyz" >/dev/null 2>&1; do sleep 0.5; done
  token="$(grep -A1 'Bearer token for MCP clients' "$dir/stdout" | tail -1 | tr -d '[:space:]')"
fi
# The bearer header, when there is a token (the echo server takes none).
auth=()
[[ -n "$token" ]] && auth=(-H "authorization: Bearer $token")
open_session() {
  local id
  id="$(curl -s -D - -o /dev/null "$base/mcp" "${auth[@]}" -H 'content-type: application/json' \
    -H 'accept: application/json, text/event-stream' -H 'mcp-protocol-version: 2025-11-25' \
    -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"callgrind","version":"1"}}}' \
    | tr -d '\r' | awk -F': ' 'tolower($1)=="mcp-session-id"{print $2}')"
  curl -s -o /dev/null "$base/mcp" "${auth[@]}" -H 'content-type: application/json' \
    -H 'accept: application/json, text/event-stream' -H 'mcp-protocol-version: 2025-11-25' -H "mcp-session-id: $id" \
    -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  echo "$id"
}
callgrind_control -z "$vg" >/dev/null
sleep 10
callgrind_control -d "$vg" >/dev/null
idle_ir="$(grep -m1 '^summary:\|^totals:' "$(ls -t "$dir"/callgrind.out.* | head -1)" | awk '{print $2}')"
echo "idle: $((idle_ir / 10)) instructions per second"
for sessions in 1 64; do
  ids=()
  for _ in $(seq "$sessions"); do ids+=("$(open_session)"); done
  connections=$((sessions > 16 ? sessions : 16))
  run() {
    MCP_SESSIONS="$(IFS=,; echo "${ids[*]}")" MCP_TOKEN="$token" MCP_TOOL="$tool" MCP_ARGS="$args" \
      wrk -t 2 -c "$connections" -d "${1}s" -s bench/mcp.lua "$base/mcp" | grep '^RESULT' | sed 's/^RESULT //'
  }
  run 5 >/dev/null
  callgrind_control -z "$vg" >/dev/null
  result="$(run "$seconds")"
  callgrind_control -d "$vg" >/dev/null
  out="$(ls -t "$dir"/callgrind.out.* | head -1)"
  ir="$(grep -m1 '^summary:\|^totals:' "$out" | awk '{print $2}')"
  requests="$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['requests'])" "$result")"
  errors="$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['errors'])" "$result")"
  per_call="$(python3 -c "import json,sys; r=json.loads(sys.argv[1]); print(round(($ir - $idle_ir / 10 * r['seconds']) / r['requests']))" "$result")"
  echo "$sessions session(s) x $connections connections, $tool: $requests calls ($errors errors), $per_call instructions per call (idle share removed; $((ir / requests)) with it)  [$out]"
  for id in "${ids[@]}"; do
    curl -s -o /dev/null -X DELETE "$base/mcp" "${auth[@]}" \
      -H 'mcp-protocol-version: 2025-11-25' -H "mcp-session-id: $id"
  done
done
