#!/usr/bin/env bash
# Which of the broker's source files one tool call walks through, and which it comes back to:
# runs the measurement test (tests/api/structure/call_paths.rs) under callgrind, which records one
# `provider_request` call and one forwarded call on ready connections, each with its call chains.
set -euo pipefail
cd "$(dirname "$0")/.."
filter="${1:-a_provider_request_and_a_forwarded_call_on_a_ready_connection}"
out="${CALL_PATH_OUT:-target/call-path}"
mkdir -p "$out"
rm -f "$out"/callgrind.out.*
cargo build --quiet --example upstream_server
test_binary="$(cargo test --quiet --test api --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("target",{}).get("name")=="api" and m.get("executable"): print(m["executable"])' | tail -n1)"
CALL_PATH_UNDER_CALLGRIND=1 valgrind --tool=callgrind --separate-callers=60 --trace-children=no \
  --instr-atstart=no \
  --callgrind-out-file="$out/callgrind.out.%p" \
  "$test_binary" --ignored --test-threads=1 "$filter" --nocapture >"$out/test.log" 2>&1 || true
# Callgrind 3.19 may abort on a signal while the test winds down, after both measured calls were
# dumped: what counts is that both dumps are there (each is written only once its call answered).
dumps=($(ls "$out"/callgrind.out.*.1 "$out"/callgrind.out.*.2 2>/dev/null | sort))
if [ "${#dumps[@]}" -ne 2 ]; then
  echo "expected two dumps in $out, found ${#dumps[@]}"; tail -n 40 "$out/test.log"; exit 1
fi
echo "== provider_request on a ready connection"
python3 bench/call_path.py "${dumps[0]}" .
echo "== a call forwarded to a server behind the broker"
python3 bench/call_path.py "${dumps[1]}" .
