-- Several instances on one database (issue 9).
--
-- The signal outbox: every signal one instance sends to the others ("authorization finished",
-- "this user's connections changed", …) is a row here, carrying ids only, never a secret. The
-- trigger below announces each row with NOTIFY for speed; a listener that was reconnecting
-- when a row was announced reads what it missed from this table. Old rows are pruned.
CREATE TABLE signal_outbox (
    id BIGSERIAL PRIMARY KEY,
    -- The process that sent it (a random id per process), so it does not deliver its own twice.
    origin TEXT NOT NULL,
    -- The signal as JSON.
    payload TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX signal_outbox_created_at ON signal_outbox (created_at);

-- NOTIFY payloads are limited to 8000 bytes: a row too large to announce whole is announced by
-- id and origin only, and listeners read it from the table.
CREATE FUNCTION oauth_broker_announce_signal() RETURNS trigger AS $$
BEGIN
    IF octet_length(NEW.payload) < 7000 THEN
        PERFORM pg_notify('oauth_broker_signals', NEW.id::text || ' ' || NEW.origin || ' ' || NEW.payload);
    ELSE
        PERFORM pg_notify('oauth_broker_signals', NEW.id::text || ' ' || NEW.origin);
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER signal_outbox_announce AFTER INSERT ON signal_outbox
    FOR EACH ROW EXECUTE FUNCTION oauth_broker_announce_signal();

-- Sign-in throttle shared by every instance (src/web/throttle.rs): one row per failed sign-in
-- per budget it counts toward (bucket = kind and key, e.g. "pair\nalice\n203.0.113.7"; a
-- username is a key, never a secret), one row per locked bucket, and the addresses that
-- signed in to an account successfully.
CREATE TABLE throttle_failures (
    id BIGSERIAL PRIMARY KEY,
    bucket TEXT NOT NULL,
    at BIGINT NOT NULL
);
CREATE INDEX throttle_failures_bucket ON throttle_failures (bucket, at);
CREATE TABLE throttle_locks (
    bucket TEXT PRIMARY KEY,
    locked_until BIGINT NOT NULL,
    -- Account buckets: consecutive locks, for the doubling.
    strikes INTEGER NOT NULL
);
CREATE TABLE throttle_known_addresses (
    account TEXT NOT NULL,
    address TEXT NOT NULL,
    at BIGINT NOT NULL,
    PRIMARY KEY (account, address)
);
