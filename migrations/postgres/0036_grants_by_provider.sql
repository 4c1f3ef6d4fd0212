-- Gateway mode: `admin servers rediscover` deletes every user's grants at a server whose
-- authorization server moved, a few hundred per statement so that none holds the write lock
-- for long; each statement finds its rows by provider. Without this index each one scanned the
-- whole table (a million grants: 0.2 s per statement under SQLite's write lock, 22 s for
-- 50,000 grants). Additive: an older server ignores the index.
CREATE INDEX grants_provider ON grants (provider);
