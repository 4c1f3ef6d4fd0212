-- Issue 28: the token API's audit rows stay cheap to write. Every token-API answer is audited,
-- thousands a second, written in batches by `store::audit_queue`; per-row triggers that index
-- each row's text (FTS5 trigram) and upsert an hourly count cut the writer to a sixth of its
-- speed, and a full queue makes requests wait. Those rows differ only in a handful of values
-- (service, provider, answer, outcome), so their searchable text is kept once per distinct
-- text in `audit_texts` (indexed, a few rows per service and provider), each row naming its
-- text by `text_id`; the batch writer also counts them per hour itself, one upsert per group.
-- A row with a `text_id` is searched through `audit_texts`; a row without one (everything
-- else, and every row written before this migration) through `audit_log_search` as before.
-- Same search answers, same counts, for every writer.
CREATE TABLE audit_texts (
    id TEXT PRIMARY KEY,
    -- Exactly the audit list's searchable text (`store::audit`, `AUDIT_TEXT`), lowercased.
    text TEXT NOT NULL UNIQUE
);
CREATE VIRTUAL TABLE audit_texts_search USING fts5(text, tokenize = 'trigram');
CREATE TRIGGER audit_texts_search_insert AFTER INSERT ON audit_texts BEGIN
    INSERT INTO audit_texts_search (rowid, text) VALUES (new.rowid, new.text);
END;
CREATE TRIGGER audit_texts_search_delete AFTER DELETE ON audit_texts BEGIN
    DELETE FROM audit_texts_search WHERE rowid = old.rowid;
END;

ALTER TABLE audit_log ADD COLUMN text_id TEXT;
CREATE INDEX audit_log_text ON audit_log (text_id, id) WHERE text_id IS NOT NULL;

DROP TRIGGER audit_log_search_insert;
CREATE TRIGGER audit_log_search_insert AFTER INSERT ON audit_log WHEN NEW.text_id IS NULL BEGIN
    INSERT INTO audit_log_search (rowid, text) VALUES (new.rowid, new.action || ' ' || COALESCE(new.actor, '') || ' ' || COALESCE(new.outcome, '') || ' ' || COALESCE(new.provider, '') || ' ' || COALESCE(new.detail, ''));
END;

DROP TRIGGER console_counts_token_api;
CREATE TRIGGER console_counts_token_api AFTER INSERT ON audit_log
WHEN NEW.text_id IS NULL AND NEW.action LIKE 'token\_api.%' ESCAPE '\' AND NEW.actor LIKE 'service:%'
BEGIN
    INSERT INTO console_counts (hour, series, label, sub, n)
    VALUES (NEW.at - NEW.at % 3600, 'token_api', substr(NEW.actor, 9), COALESCE(NEW.outcome, 'success'), 1)
    ON CONFLICT (hour, series, label, sub) DO UPDATE SET n = console_counts.n + 1;
END;
