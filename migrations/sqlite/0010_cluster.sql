-- Several instances on one database (issue 9).
--
-- The signal outbox is PostgreSQL's (LISTEN/NOTIFY); on SQLite signals stay in the process,
-- and the table exists only so both databases have the same tables.
CREATE TABLE signal_outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    origin TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX signal_outbox_created_at ON signal_outbox (created_at);

-- Sign-in throttle shared by every process on this database (src/web/throttle.rs): one row
-- per failed sign-in per budget it counts toward (bucket = kind and key; a username is a key,
-- never a secret), one row per locked bucket, and the addresses that signed in to an account
-- successfully.
CREATE TABLE throttle_failures (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    bucket TEXT NOT NULL,
    at INTEGER NOT NULL
);
CREATE INDEX throttle_failures_bucket ON throttle_failures (bucket, at);
CREATE TABLE throttle_locks (
    bucket TEXT PRIMARY KEY,
    locked_until INTEGER NOT NULL,
    strikes INTEGER NOT NULL
);
CREATE TABLE throttle_known_addresses (
    account TEXT NOT NULL,
    address TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (account, address)
);
