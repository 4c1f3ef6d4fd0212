#!/usr/bin/env bash
# The admin console at scale: seeds N users, grants, consents, authorizations and audit rows
# with set-based SQL (a recursive CTE on SQLite, generate_series on PostgreSQL, so 1M rows seed
# in seconds), then times start-up, every admin page and search (over HTTP, signed in as an
# admin) and every CLI list (time to its first lines).
#   bench/scale.sh [--backend sqlite|postgres] [--rows 100000] [--runs 5] [--bin PATH]
# PostgreSQL: a database `scale_bench` on $SCALE_PG (default postgres://postgres@127.0.0.1:5432),
# dropped and created afresh. Needs sqlite3 / psql and curl. Prints one line per measurement:
#   <what> <p50 ms> <min ms> <max ms>
# The binary defaults to target/release/oauth-broker, else target/debug/oauth-broker.
set -euo pipefail
cd "$(dirname "$0")/.."

backend=sqlite rows=100000 runs=5 bin=""
while [[ $# -gt 0 ]]; do
  case "$1" in
  --backend) backend="$2"; shift 2 ;;
  --rows) rows="$2"; shift 2 ;;
  --runs) runs="$2"; shift 2 ;;
  --bin) bin="$2"; shift 2 ;;
  *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ -z "$bin" ]]; then
  bin="${CARGO_TARGET_DIR:-target}/release/oauth-broker"
  [[ -x "$bin" ]] || bin="${CARGO_TARGET_DIR:-target}/debug/oauth-broker"
fi
bin="$(realpath "$bin")"

work="$(mktemp -d)"
port=$((20000 + RANDOM % 20000))
export OAUTH_BROKER_DATA_DIR="$work/data"
export OAUTH_BROKER_LISTEN="127.0.0.1:$port"
export OAUTH_BROKER_PUBLIC_URL="http://127.0.0.1:$port"
export OAUTH_BROKER_LOG_FORMAT=text
export RUST_LOG=warn
pg_base="${SCALE_PG:-postgres://postgres@127.0.0.1:5432}"
if [[ "$backend" == postgres ]]; then
  psql "$pg_base/postgres" -qc "DROP DATABASE IF EXISTS scale_bench" -c "CREATE DATABASE scale_bench" >/dev/null
  export OAUTH_BROKER_DATABASE_URL="$pg_base/scale_bench"
  sql() { psql -qtAX -v ON_ERROR_STOP=1 "$OAUTH_BROKER_DATABASE_URL" "$@"; }
else
  sql() { sqlite3 -bail "$OAUTH_BROKER_DATA_DIR/oauth-broker.db" "$@"; }
fi
server=""
cleanup() {
  [[ -n "$server" ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

ms() { date +%s%N | awk '{printf "%d", $1 / 1000000}'; }
# report NAME then one duration (ms) per line on stdin
# (a run that failed is -1: the line then says FAILED and how many runs did)
report() {
  sort -n | awk -v name="$1" '{ v[NR] = $1; if ($1 < 0) failed++ }
    END { if (failed) printf "%-44s FAILED (%d of %d runs)\n", name, failed, NR;
          else printf "%-44s %7d %7d %7d\n", name, v[int((NR + 1) / 2)], v[1], v[NR] }'
}

start_server() {
  local t0
  t0=$(ms)
  "$bin" serve >"$work/serve.log" 2>&1 &
  server=$!
  until curl -fs -o /dev/null "http://127.0.0.1:$port/healthz"; do
    kill -0 "$server" 2>/dev/null || { echo "# start-up FAILED; the server said:"; sed "s/^/#   /" "$work/serve.log"; exit 1; }
    sleep 0.01
  done
  echo $(($(ms) - t0))
}
stop_server() { kill "$server"; wait "$server" 2>/dev/null || true; server=""; }

# First start: schema, signing key and the admin who signs in.
start_server >/dev/null
stop_server
echo 'bench-password-123' | "$bin" admin users add benchadmin --password-stdin --admin >/dev/null
# A tool server, for its own page and the services list.
OAUTH_BROKER_DEMO=true "$bin" admin services add benchsvc --providers demo --resource https://tools.example/mcp >/dev/null 2>&1

n=$rows
t0=$(ms)
if [[ "$backend" == postgres ]]; then
  sql <<SQL
INSERT INTO users (id, issuer, subject, username, password_hash, created_at, display_name, is_admin)
  SELECT 'u' || i, 'local', 'user' || i, 'user' || i, NULL, 1700000000 + i, 'User ' || i, 0 FROM generate_series(1, $n) i;
INSERT INTO grants (id, user_id, provider, account_label, scopes, access_token_sealed, refresh_token_sealed, key_id,
                    expires_at, status, version, created_at, updated_at, account_id)
  SELECT 'g' || i, 'u' || i, 'demo', 'acct' || i, 'notes.read', k.s, k.s, 'bench', 1700000000 + i,
         CASE WHEN i % 50 = 0 THEN 'needs_reconsent' ELSE 'active' END, 1, 1700000000 + i, 1700000000 + i, 'a' || i
  FROM generate_series(1, $n) i, (SELECT private_key_sealed AS s FROM signing_keys LIMIT 1) k;
INSERT INTO client_consents (grant_id, client_key, user_id, client_name, scopes, created_at, updated_at)
  SELECT 'g' || i, 'client:c' || (i % 100), 'u' || i, 'Client ' || (i % 100), 'notes.read', 1700000000 + i, 1700000000 + i
  FROM generate_series(1, $n) i;
INSERT INTO authorizations (id, user_id, provider, scopes, client_name, status, failure, created_at, expires_at, updated_at, client_key, kind)
  SELECT 'a' || i, 'u' || i, 'demo', 'notes.read', 'Client ' || (i % 100),
         (ARRAY['completed', 'declined', 'failed', 'pending', 'completed'])[1 + i % 5],
         CASE WHEN i % 5 = 2 THEN 'provider said no' END, 1700000000 + i, 1700000600 + i, 1700000000 + i,
         'client:c' || (i % 100), 'connect'
  FROM generate_series(1, $n) i;
-- The audit log's per-row count triggers are set aside for the seed and their tables filled
-- from it afterwards, set-based, as migration 0028 filled them: in one statement, 900,000
-- updates of one provider's health row each walk that row's chain of versions (quadratic).
ALTER TABLE audit_log DISABLE TRIGGER console_counts_audit, DISABLE TRIGGER provider_health_refreshed;
INSERT INTO audit_log (at, user_id, action, provider, detail, actor, outcome)
  SELECT 1700000000 + i, 'u' || i, CASE WHEN i % 10 = 0 THEN 'authorization.failed' ELSE 'grant.refreshed' END, 'demo',
         'seq=' || i, 'broker', CASE WHEN i % 10 = 0 THEN 'failure' ELSE 'success' END
  FROM generate_series(1, $n) i;
ALTER TABLE audit_log ENABLE TRIGGER console_counts_audit, ENABLE TRIGGER provider_health_refreshed;
INSERT INTO console_counts (hour, series, label, sub, n)
  SELECT at - at % 3600, 'authorizations', 'failed', '', COUNT(*) FROM audit_log
  WHERE action = 'authorization.failed' GROUP BY 1
  ON CONFLICT (hour, series, label, sub) DO UPDATE SET n = console_counts.n + excluded.n;
INSERT INTO provider_health (provider, last_success_at)
  SELECT provider, MAX(at) FROM audit_log WHERE action = 'grant.refreshed' GROUP BY provider
  ON CONFLICT (provider) DO UPDATE SET last_success_at = excluded.last_success_at;
-- As autovacuum leaves a table at rest: statistics, and the visibility map that lets an
-- index-only scan (a dashboard count) skip the table.
VACUUM ANALYZE;
SQL
else
  sql <<SQL
PRAGMA journal_mode = WAL;
BEGIN;
INSERT INTO users (id, issuer, subject, username, password_hash, created_at, display_name, is_admin)
  WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < $n)
  SELECT 'u' || i, 'local', 'user' || i, 'user' || i, NULL, 1700000000 + i, 'User ' || i, 0 FROM s;
INSERT INTO grants (id, user_id, provider, account_label, scopes, access_token_sealed, refresh_token_sealed, key_id,
                    expires_at, status, version, created_at, updated_at, account_id)
  WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < $n)
  SELECT 'g' || i, 'u' || i, 'demo', 'acct' || i, 'notes.read', k.s, k.s, 'bench', 1700000000 + i,
         CASE WHEN i % 50 = 0 THEN 'needs_reconsent' ELSE 'active' END, 1, 1700000000 + i, 1700000000 + i, 'a' || i
  FROM s, (SELECT private_key_sealed AS s FROM signing_keys LIMIT 1) k;
INSERT INTO client_consents (grant_id, client_key, user_id, client_name, scopes, created_at, updated_at)
  WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < $n)
  SELECT 'g' || i, 'client:c' || (i % 100), 'u' || i, 'Client ' || (i % 100), 'notes.read', 1700000000 + i, 1700000000 + i FROM s;
INSERT INTO authorizations (id, user_id, provider, scopes, client_name, status, failure, created_at, expires_at, updated_at, client_key, kind)
  WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < $n)
  SELECT 'a' || i, 'u' || i, 'demo', 'notes.read', 'Client ' || (i % 100),
         CASE i % 5 WHEN 0 THEN 'completed' WHEN 1 THEN 'declined' WHEN 2 THEN 'failed' WHEN 3 THEN 'pending' ELSE 'completed' END,
         CASE WHEN i % 5 = 2 THEN 'provider said no' END, 1700000000 + i, 1700000600 + i, 1700000000 + i,
         'client:c' || (i % 100), 'connect' FROM s;
INSERT INTO audit_log (at, user_id, action, provider, detail, actor, outcome)
  WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < $n)
  SELECT 1700000000 + i, 'u' || i, CASE WHEN i % 10 = 0 THEN 'authorization.failed' ELSE 'grant.refreshed' END, 'demo',
         'seq=' || i, 'broker', CASE WHEN i % 10 = 0 THEN 'failure' ELSE 'success' END FROM s;
COMMIT;
ANALYZE;
SQL
fi
echo "# $backend, $n rows per table, seeded in $(($(ms) - t0)) ms; $bin; p50/min/max of $runs runs (ms)"

for _ in $(seq "$runs"); do
  start_server
  stop_server
done | report "start-up (until /healthz answers)"
start_server >/dev/null

# Sign in as the admin: the login form's CSRF cookie and field, then the session cookie.
jar="$work/cookies"
base="http://127.0.0.1:$port"
csrf=$(curl -fs -c "$jar" "$base/login" | grep -o 'name="csrf_token" value="[^"]*"' | head -1 | sed 's/.*value="//; s/"$//')
curl -fs -o /dev/null -b "$jar" -c "$jar" --data-urlencode "username=benchadmin" \
  --data-urlencode "password=bench-password-123" --data-urlencode "csrf_token=$csrf" "$base/login"

page() {
  local name="$1" path="$2" code
  for _ in $(seq "$runs"); do
    code=$(curl -s -o "$work/page.html" -b "$jar" -w '%{http_code} %{time_total}' "$base$path")
    if [[ "${code% *}" == 200 ]]; then
      awk -v t="${code#* }" 'BEGIN { printf "%d\n", t * 1000 }'
    else
      echo "$path answered ${code% *} after ${code#* } s" >>"$work/page-errors.txt"
      echo -1
    fi
  done | report "$name"
}
next_link() { grep -o 'rel="next" href="[^"]*"' "$work/page.html" | head -1 | sed 's/.*href="//; s/"$//; s/&amp;/\&/g; s/&#38;/\&/g'; }

page "GET /admin (dashboard)" /admin
for list in users grants authorizations consents clients services audit; do
  page "GET /admin/$list" "/admin/$list"
done
page "GET /admin/audit next page" "$(curl -s -b "$jar" "$base/admin/audit" >"$work/page.html"; next_link)"
page "GET /admin/audit?q=authorization.failed" "/admin/audit?q=authorization.failed"
page "GET /admin/audit?q=seq=$((n / 2)) (one row)" "/admin/audit?q=seq%3D$((n / 2))"
page "GET /admin/users?q=user$((n / 2)) (by name)" "/admin/users?q=user$((n / 2))"
page "GET /admin/grants?q=user$((n / 2)) (by user)" "/admin/grants?q=user$((n / 2))"
page "GET /admin/authorizations?q=failed" "/admin/authorizations?q=failed"
page "GET /admin/authorizations?q=a$((n / 2)) (by id)" "/admin/authorizations?q=a$((n / 2))"
page "GET /admin/consents?q=user$((n / 2)) (by user)" "/admin/consents?q=user$((n / 2))"
page "GET /admin/audit?q=user$((n / 2)) (by user)" "/admin/audit?q=user$((n / 2))"
page "GET /admin/grants?q=needs_reconsent" "/admin/grants?q=needs_reconsent"
page "GET /admin/users?q=zzz (no match)" "/admin/users?q=zzz"
page "GET /admin/audit?outcome=failure" "/admin/audit?outcome=failure"
page "GET /admin/audit?order=oldest" "/admin/audit?order=oldest"
page "GET /admin/audit?outcome=failure&q=demo" "/admin/audit?outcome=failure&q=demo"
for status in completed pending expired; do
  page "GET /admin/authorizations?status=$status" "/admin/authorizations?status=$status"
done
page "GET /admin/authorizations?status=expired next page" \
  "$(curl -s -b "$jar" "$base/admin/authorizations?status=expired" >"$work/page.html"; next_link)"
page "GET /admin/authorizations?status=failed&q=Client" "/admin/authorizations?status=failed&q=Client"
page "GET /admin/users/u$((n / 2)) (one user)" "/admin/users/u$((n / 2))"
page "GET /admin/providers" /admin/providers
page "GET /admin/services/svc_benchsvc" "/admin/services/svc_benchsvc"
page "GET /admin/servers" /admin/servers
page "GET /admin/webhooks" /admin/webhooks
if [[ -n "${DEEP_AUDIT:-}" ]]; then
  page "GET /admin/audit deep page" "$DEEP_AUDIT"
elif grep -q 'page=' <<<"$(next_link)"; then
  page "GET /admin/audit deep page (middle)" "/admin/audit?page=$((n / 40))"
else
  page "GET /admin/audit deep page (middle)" "/admin/audit?after=$((n / 2))"
fi
stop_server

# Time until the command has printed its first two lines (a header and a row) on stdout; a
# command that printed fewer (an error, a timeout) counts as failed.
cli() {
  local name="$1" t0 lines
  shift
  for _ in $(seq "$runs"); do
    t0=$(ms)
    lines=$({ "$bin" admin "$@" 2>>"$work/cli-errors.txt" || true; } | head -n 2 | tee -a "$work/cli.txt" | wc -l)
    if [[ $lines -ge 2 ]]; then echo $(($(ms) - t0)); else echo -1; fi
  done | report "admin $name (first lines)"
}
cli "users list" users list
cli "grants list" grants list
cli "authorizations list" authorizations list
cli "consents list" consents list
cli "audit" audit
cli "audit --user user$((n / 2))" audit --user "user$((n / 2))"
cli "keys status" keys status
cli "services list" services list
if [[ -s "$work/page-errors.txt" ]]; then
  echo "# pages that failed:"
  sed 's/^/#   /' "$work/page-errors.txt" | awk '!seen[$0]++'
fi
echo "# first lines the CLI printed:"
sed 's/^/#   /' "$work/cli.txt" | awk '!seen[$0]++'
if [[ -s "$work/cli-errors.txt" ]]; then
  echo "# errors the CLI printed:"
  grep -v ' WARN ' "$work/cli-errors.txt" | sed 's/^/#   /' | awk '!seen[$0]++'
fi
