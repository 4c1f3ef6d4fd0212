-- The token API's request budget per service as one row per service (src/store/request_budget.rs):
-- GCRA, where each request moves `paid_until_ns` (nanoseconds) on by a minute divided by the budget, and a
-- request that would put it more than a minute ahead of now is refused. One conditional
-- statement per lease of requests, whatever the rate; it replaces the sliding minute kept as
-- one `throttle_failures` row per request (bucket `api` + newline + service id), whose rows
-- are removed here (other buckets — failed authentications, sign-ins, registrations — stay).
-- An instance of an older version still counts in `throttle_failures` during a rolling
-- upgrade: each version then holds its own budget until the old instances are gone.
CREATE TABLE api_budgets (
    service_id TEXT PRIMARY KEY,
    paid_until_ns BIGINT NOT NULL
);
DELETE FROM throttle_failures WHERE substr(bucket, 1, 4) = 'api' || chr(10);
