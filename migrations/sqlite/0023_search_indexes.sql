-- Admin searches at a million rows: an FTS5 table with the trigram tokenizer (SQLite 3.34+;
-- sqlx's bundled SQLite has FTS5) holds each list's searchable text, spelled as
-- `store::search` spells it, under the row's rowid; triggers keep it as the rows change. A
-- search of three characters or more asks it for the rows holding the term instead of reading
-- the table (`store::search`). Rowids are what ties the two; SQLite's VACUUM and VACUUM INTO
-- (`admin backup`) keep them. Building them reads each table once.

CREATE VIRTUAL TABLE users_search USING fts5(text, name, tokenize = 'trigram');
CREATE TRIGGER users_search_insert AFTER INSERT ON users BEGIN
    INSERT INTO users_search (rowid, text, name) VALUES (new.rowid, COALESCE(new.username, '') || ' ' || COALESCE(new.display_name, '') || ' ' || new.subject || ' ' || new.id || ' ' || new.issuer || ' ' || CASE WHEN new.is_admin <> 0 THEN 'admin' ELSE 'user' END || ' ' || CASE WHEN new.disabled_at IS NULL THEN 'enabled' ELSE 'disabled' END || ' ' || CASE WHEN new.username IS NULL THEN 'external (oidc)' ELSE 'local account' END, COALESCE(new.username, '') || ' ' || COALESCE(new.display_name, '') || ' ' || new.subject);
END;
CREATE TRIGGER users_search_update AFTER UPDATE OF username, display_name, subject, id, issuer, is_admin, disabled_at ON users BEGIN
    DELETE FROM users_search WHERE rowid = old.rowid;
    INSERT INTO users_search (rowid, text, name) VALUES (new.rowid, COALESCE(new.username, '') || ' ' || COALESCE(new.display_name, '') || ' ' || new.subject || ' ' || new.id || ' ' || new.issuer || ' ' || CASE WHEN new.is_admin <> 0 THEN 'admin' ELSE 'user' END || ' ' || CASE WHEN new.disabled_at IS NULL THEN 'enabled' ELSE 'disabled' END || ' ' || CASE WHEN new.username IS NULL THEN 'external (oidc)' ELSE 'local account' END, COALESCE(new.username, '') || ' ' || COALESCE(new.display_name, '') || ' ' || new.subject);
END;
CREATE TRIGGER users_search_delete AFTER DELETE ON users BEGIN
    DELETE FROM users_search WHERE rowid = old.rowid;
END;
INSERT INTO users_search (rowid, text, name) SELECT rowid, COALESCE(username, '') || ' ' || COALESCE(display_name, '') || ' ' || subject || ' ' || id || ' ' || issuer || ' ' || CASE WHEN is_admin <> 0 THEN 'admin' ELSE 'user' END || ' ' || CASE WHEN disabled_at IS NULL THEN 'enabled' ELSE 'disabled' END || ' ' || CASE WHEN username IS NULL THEN 'external (oidc)' ELSE 'local account' END, COALESCE(username, '') || ' ' || COALESCE(display_name, '') || ' ' || subject FROM users;

CREATE VIRTUAL TABLE grants_search USING fts5(text, tokenize = 'trigram');
CREATE TRIGGER grants_search_insert AFTER INSERT ON grants BEGIN
    INSERT INTO grants_search (rowid, text) VALUES (new.rowid, new.provider || ' ' || COALESCE(new.account_label, '') || ' ' || new.status || ' ' || new.scopes || ' ' || new.id);
END;
CREATE TRIGGER grants_search_update AFTER UPDATE OF provider, account_label, status, scopes, id ON grants BEGIN
    DELETE FROM grants_search WHERE rowid = old.rowid;
    INSERT INTO grants_search (rowid, text) VALUES (new.rowid, new.provider || ' ' || COALESCE(new.account_label, '') || ' ' || new.status || ' ' || new.scopes || ' ' || new.id);
END;
CREATE TRIGGER grants_search_delete AFTER DELETE ON grants BEGIN
    DELETE FROM grants_search WHERE rowid = old.rowid;
END;
INSERT INTO grants_search (rowid, text) SELECT rowid, provider || ' ' || COALESCE(account_label, '') || ' ' || status || ' ' || scopes || ' ' || id FROM grants;

CREATE VIRTUAL TABLE authorizations_search USING fts5(text, tokenize = 'trigram');
CREATE TRIGGER authorizations_search_insert AFTER INSERT ON authorizations BEGIN
    INSERT INTO authorizations_search (rowid, text) VALUES (new.rowid, new.provider || ' ' || new.kind || ' ' || COALESCE(new.client_name, '') || ' ' || new.client_key || ' ' || new.scopes || ' ' || COALESCE(new.failure, '') || ' ' || new.id);
END;
CREATE TRIGGER authorizations_search_update AFTER UPDATE OF provider, kind, client_name, client_key, scopes, failure, id ON authorizations BEGIN
    DELETE FROM authorizations_search WHERE rowid = old.rowid;
    INSERT INTO authorizations_search (rowid, text) VALUES (new.rowid, new.provider || ' ' || new.kind || ' ' || COALESCE(new.client_name, '') || ' ' || new.client_key || ' ' || new.scopes || ' ' || COALESCE(new.failure, '') || ' ' || new.id);
END;
CREATE TRIGGER authorizations_search_delete AFTER DELETE ON authorizations BEGIN
    DELETE FROM authorizations_search WHERE rowid = old.rowid;
END;
INSERT INTO authorizations_search (rowid, text) SELECT rowid, provider || ' ' || kind || ' ' || COALESCE(client_name, '') || ' ' || client_key || ' ' || scopes || ' ' || COALESCE(failure, '') || ' ' || id FROM authorizations;

CREATE VIRTUAL TABLE client_consents_search USING fts5(text, tokenize = 'trigram');
CREATE TRIGGER client_consents_search_insert AFTER INSERT ON client_consents BEGIN
    INSERT INTO client_consents_search (rowid, text) VALUES (new.rowid, new.client_key || ' ' || COALESCE(new.client_name, '') || ' ' || new.scopes || ' ' || new.grant_id);
END;
CREATE TRIGGER client_consents_search_update AFTER UPDATE OF client_key, client_name, scopes, grant_id ON client_consents BEGIN
    DELETE FROM client_consents_search WHERE rowid = old.rowid;
    INSERT INTO client_consents_search (rowid, text) VALUES (new.rowid, new.client_key || ' ' || COALESCE(new.client_name, '') || ' ' || new.scopes || ' ' || new.grant_id);
END;
CREATE TRIGGER client_consents_search_delete AFTER DELETE ON client_consents BEGIN
    DELETE FROM client_consents_search WHERE rowid = old.rowid;
END;
INSERT INTO client_consents_search (rowid, text) SELECT rowid, client_key || ' ' || COALESCE(client_name, '') || ' ' || scopes || ' ' || grant_id FROM client_consents;

CREATE VIRTUAL TABLE audit_log_search USING fts5(text, tokenize = 'trigram');
CREATE TRIGGER audit_log_search_insert AFTER INSERT ON audit_log BEGIN
    INSERT INTO audit_log_search (rowid, text) VALUES (new.rowid, new.action || ' ' || COALESCE(new.actor, '') || ' ' || COALESCE(new.outcome, '') || ' ' || COALESCE(new.provider, '') || ' ' || COALESCE(new.detail, ''));
END;
CREATE TRIGGER audit_log_search_update AFTER UPDATE OF action, actor, outcome, provider, detail ON audit_log BEGIN
    DELETE FROM audit_log_search WHERE rowid = old.rowid;
    INSERT INTO audit_log_search (rowid, text) VALUES (new.rowid, new.action || ' ' || COALESCE(new.actor, '') || ' ' || COALESCE(new.outcome, '') || ' ' || COALESCE(new.provider, '') || ' ' || COALESCE(new.detail, ''));
END;
CREATE TRIGGER audit_log_search_delete AFTER DELETE ON audit_log BEGIN
    DELETE FROM audit_log_search WHERE rowid = old.rowid;
END;
INSERT INTO audit_log_search (rowid, text) SELECT rowid, action || ' ' || COALESCE(actor, '') || ' ' || COALESCE(outcome, '') || ' ' || COALESCE(provider, '') || ' ' || COALESCE(detail, '') FROM audit_log;
