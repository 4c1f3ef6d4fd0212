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

CREATE TRIGGER auth_epoch_users_update AFTER UPDATE ON users
BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_users_delete AFTER DELETE ON users
BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_oauth_grants_update AFTER UPDATE ON oauth_grants
BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_oauth_grants_delete AFTER DELETE ON oauth_grants
BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_consents_insert AFTER INSERT ON client_consents
BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_consents_update AFTER UPDATE ON client_consents
BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_consents_delete AFTER DELETE ON client_consents
BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
