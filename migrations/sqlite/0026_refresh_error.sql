-- Issue 27: why a grant's last refresh failed, so every face can say so ("refresh failing:
-- rate_limited, next try at …", "revoked at the provider"). One of `rate_limited`,
-- `server_error`, `timeout`, `unreachable`, `refused` (the grant stays active; the backoff of
-- migration 0013 says when the next try is due), or `invalid_grant`, `no_refresh_token`,
-- `unreadable` (the grant needs a new consent). NULL after a refresh or a new consent succeeds.
-- Additive: an older instance ignores it.
ALTER TABLE grants ADD COLUMN refresh_error TEXT;
