-- Issue 28: the token API's audit rows stay cheap to write. Every token-API answer is audited,
-- thousands a second, written in batches by `store::audit_queue`; per-row work on each (the
-- trigram index on its text, an hourly-count upsert on one hot row) made the writer the
-- bottleneck, and a full queue makes requests wait. Those rows differ only in a handful of
-- values (service, provider, answer, outcome), so their searchable text is kept once per
-- distinct text in `audit_texts` (indexed, a few rows per service and provider), each row
-- naming its text by `text_id`; the batch writer also counts them per hour itself, one upsert
-- per group. A row with a `text_id` is searched through `audit_texts`; a row without one
-- (everything else, and every row written before this migration) through the trigram index,
-- now partial. Same search answers, same counts, for every writer. Rebuilding the partial
-- index reads the audit log once (about a minute per ten million rows).
CREATE TABLE audit_texts (
    id TEXT PRIMARY KEY,
    -- Exactly the audit list's searchable text (`store::audit`, `AUDIT_TEXT`), lowercased.
    text TEXT NOT NULL UNIQUE
);

ALTER TABLE audit_log ADD COLUMN text_id TEXT;
CREATE INDEX audit_log_text ON audit_log (text_id, id) WHERE text_id IS NOT NULL;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        EXECUTE $sql$CREATE INDEX audit_texts_search ON audit_texts USING gin (text gin_trgm_ops)$sql$;
        EXECUTE $sql$DROP INDEX IF EXISTS audit_log_search$sql$;
        EXECUTE $sql$CREATE INDEX audit_log_search ON audit_log USING gin (LOWER(action || ' ' || COALESCE(actor, '') || ' ' || COALESCE(outcome, '') || ' ' || COALESCE(provider, '') || ' ' || COALESCE(detail, '')) gin_trgm_ops) WHERE text_id IS NULL$sql$;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION console_counts_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.action IN ('authorization.completed', 'authorization.declined', 'authorization.failed',
                      'authorization.expired', 'admin.authorization_expired') THEN
        PERFORM console_count(NEW.at, 'authorizations',
            CASE NEW.action WHEN 'authorization.completed' THEN 'completed'
                            WHEN 'authorization.declined' THEN 'declined'
                            WHEN 'authorization.failed' THEN 'failed'
                            ELSE 'expired' END, '');
    ELSIF NEW.text_id IS NULL AND NEW.action LIKE 'token\_api.%' AND NEW.actor LIKE 'service:%' THEN
        -- Rows with a text id come from the batch writer, which counts them per batch.
        PERFORM console_count(NEW.at, 'token_api', substr(NEW.actor, 9), COALESCE(NEW.outcome, 'success'));
    END IF;
    RETURN NULL;
END $$;

-- Per-row triggers on the audit log run only for the rows they act on: a trigger's WHEN is
-- checked without calling its function, so a token-API row from the batch writer costs none.
DROP TRIGGER console_counts_audit ON audit_log;
CREATE TRIGGER console_counts_audit AFTER INSERT ON audit_log FOR EACH ROW
    WHEN (NEW.action IN ('authorization.completed', 'authorization.declined', 'authorization.failed',
                         'authorization.expired', 'admin.authorization_expired')
          OR (NEW.text_id IS NULL AND NEW.action LIKE 'token\_api.%'))
    EXECUTE FUNCTION console_counts_audit();
DROP TRIGGER provider_health_refreshed ON audit_log;
CREATE TRIGGER provider_health_refreshed AFTER INSERT ON audit_log FOR EACH ROW
    WHEN (NEW.action = 'grant.refreshed')
    EXECUTE FUNCTION provider_health_refreshed();
