-- Issue 11: which process moved `auth_epoch` (0012, 0015). A server drops its caches at once
-- after its own writes; when its watcher then saw the counter move it could not tell its own
-- moves from another process's and dropped everything a second time. Each server counts its own
-- moves here under an id of its own (the session setting `oauth_broker.writer`, which its
-- connections set), in the same transaction as the counter: the counter minus the server's own
-- row is exactly what every other writer did. Writers without the setting (hand-written SQL)
-- only move the counter. Additive: an older server ignores it.
CREATE TABLE auth_epoch_writers (
    writer TEXT PRIMARY KEY,
    n BIGINT NOT NULL
);

CREATE OR REPLACE FUNCTION bump_auth_epoch() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    me TEXT := current_setting('oauth_broker.writer', true);
BEGIN
    UPDATE auth_epoch SET n = n + 1 WHERE id = 1;
    IF me IS NOT NULL AND me <> '' THEN
        INSERT INTO auth_epoch_writers (writer, n) VALUES (me, 1)
            ON CONFLICT (writer) DO UPDATE SET n = auth_epoch_writers.n + 1;
    END IF;
    RETURN NULL;
END
$$;
