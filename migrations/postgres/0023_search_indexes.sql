-- Admin searches at a million rows: a trigram index (pg_trgm, GIN) on each list's searchable
-- text, spelled exactly as `store::search` asks (`LOWER(…) LIKE '%term%'`), so a search for a
-- rare term reads its few matches instead of the table. pg_trgm ships with PostgreSQL and is a
-- trusted extension (a database owner may create it); where it cannot be created the indexes
-- are left out and searches still answer, by reading the table (docs/operations.md says how to
-- add them later). Building them reads each table once.
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
EXCEPTION WHEN insufficient_privilege OR undefined_file THEN
    RAISE NOTICE 'pg_trgm could not be created (%): admin searches read whole tables', SQLERRM;
END
$$;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        EXECUTE $sql$CREATE INDEX users_search ON users USING gin (LOWER(COALESCE(username, '') || ' ' || COALESCE(display_name, '') || ' ' || subject || ' ' || id || ' ' || issuer || ' ' || CASE WHEN is_admin <> 0 THEN 'admin' ELSE 'user' END || ' ' || CASE WHEN disabled_at IS NULL THEN 'enabled' ELSE 'disabled' END || ' ' || CASE WHEN username IS NULL THEN 'external (oidc)' ELSE 'local account' END) gin_trgm_ops)$sql$;
        EXECUTE $sql$CREATE INDEX users_name_search ON users USING gin (LOWER(COALESCE(username, '') || ' ' || COALESCE(display_name, '') || ' ' || subject) gin_trgm_ops)$sql$;
        EXECUTE $sql$CREATE INDEX grants_search ON grants USING gin (LOWER(provider || ' ' || COALESCE(account_label, '') || ' ' || status || ' ' || scopes || ' ' || id) gin_trgm_ops)$sql$;
        EXECUTE $sql$CREATE INDEX authorizations_search ON authorizations USING gin (LOWER(provider || ' ' || kind || ' ' || COALESCE(client_name, '') || ' ' || client_key || ' ' || scopes || ' ' || COALESCE(failure, '') || ' ' || id) gin_trgm_ops)$sql$;
        EXECUTE $sql$CREATE INDEX client_consents_search ON client_consents USING gin (LOWER(client_key || ' ' || COALESCE(client_name, '') || ' ' || scopes || ' ' || grant_id) gin_trgm_ops)$sql$;
        EXECUTE $sql$CREATE INDEX audit_log_search ON audit_log USING gin (LOWER(action || ' ' || COALESCE(actor, '') || ' ' || COALESCE(outcome, '') || ' ' || COALESCE(provider, '') || ' ' || COALESCE(detail, '')) gin_trgm_ops)$sql$;
    END IF;
END
$$;
