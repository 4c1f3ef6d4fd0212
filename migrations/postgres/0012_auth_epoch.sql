-- Issue 11: a counter that moves whenever something a cached access decision depends on
-- changes — a user (disabled, deleted), a token's authorization (revoked), a client's consent
-- (given, widened, withdrawn). Servers cache verified bearer tokens and consents, read this one
-- row per request and drop their caches when it moved. Triggers move it, so every writer counts:
-- this server, another instance, the admin CLI in another process, or hand-written SQL.
CREATE TABLE auth_epoch (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n BIGINT NOT NULL
);
INSERT INTO auth_epoch (id, n) VALUES (1, 0);

CREATE FUNCTION bump_auth_epoch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE auth_epoch SET n = n + 1 WHERE id = 1;
    RETURN NULL;
END
$$;

-- Per statement: a statement touching many rows moves the counter once.
CREATE TRIGGER auth_epoch_users AFTER UPDATE OR DELETE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION bump_auth_epoch();
CREATE TRIGGER auth_epoch_oauth_grants AFTER UPDATE OR DELETE ON oauth_grants
    FOR EACH STATEMENT EXECUTE FUNCTION bump_auth_epoch();
CREATE TRIGGER auth_epoch_consents AFTER INSERT OR UPDATE OR DELETE ON client_consents
    FOR EACH STATEMENT EXECUTE FUNCTION bump_auth_epoch();
