-- Issue 12: a refresh that failed transiently (429, 5xx, timeout, no connection) is not tried
-- again before `refresh_not_before` (the provider's Retry-After, else exponential backoff by
-- `refresh_failures`, reset on success); and the provider sees at most N refresh attempts per
-- grant per minute (`refresh_window_start`, `refresh_window_count`), counted by the same
-- conditional UPDATE that claims the refresh lease, so two instances cannot both pass the cap.
-- In the row, so a restart or another instance honours them too. Additive: an older instance
-- ignores them.
ALTER TABLE grants ADD COLUMN refresh_not_before BIGINT;
ALTER TABLE grants ADD COLUMN refresh_failures BIGINT NOT NULL DEFAULT 0;
ALTER TABLE grants ADD COLUMN refresh_window_start BIGINT;
ALTER TABLE grants ADD COLUMN refresh_window_count BIGINT NOT NULL DEFAULT 0;
