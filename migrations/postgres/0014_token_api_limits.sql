-- Token-API limits shared by every instance on this database (issue 9, src/api/limits.rs).
--
-- The request budget per service counts in throttle_failures (migration 0010). This table holds
-- one row per open long poll / event stream of a service: the row is its slot in the service's
-- cap of concurrent waits. The instance serving the wait renews `expires_at` while it is open
-- and deletes the row when it ends; a row whose instance died (SIGKILL, lost network) lapses
-- at `expires_at` and no longer counts. Additive: an older instance never reads it.
CREATE TABLE api_waits (
    id TEXT PRIMARY KEY,
    service_id TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX api_waits_service ON api_waits (service_id, expires_at);
