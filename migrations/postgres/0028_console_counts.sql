-- Issue 29: the admin dashboard's charts (last 24 hours / 7 days) read hourly counts kept here
-- as the data changes, never a scan of the audit log or the grants: authorizations by outcome,
-- token-API answers by service and outcome, refresh failures by provider and kind, sign-ins.
-- Triggers keep it, so every writer counts (this server, another instance, the admin CLI,
-- hand-written SQL). `hour` is the hour's first Unix second; rows are a few per hour and
-- series value. Additive: an older server ignores the table (and its triggers keep counting).
CREATE TABLE console_counts (
    hour BIGINT NOT NULL,
    series TEXT NOT NULL,
    label TEXT NOT NULL,
    sub TEXT NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (hour, series, label, sub)
);

CREATE FUNCTION console_count(at_ BIGINT, series_ TEXT, label_ TEXT, sub_ TEXT) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO console_counts (hour, series, label, sub, n) VALUES (at_ - at_ % 3600, series_, label_, sub_, 1)
    ON CONFLICT (hour, series, label, sub) DO UPDATE SET n = console_counts.n + 1
$$;

-- The outcome of each connect attempt, as the audit log records its end; every token-API
-- answer, audited with the service as actor (`api/tokens.rs`, `api/limits.rs`).
CREATE FUNCTION console_counts_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.action IN ('authorization.completed', 'authorization.declined', 'authorization.failed',
                      'authorization.expired', 'admin.authorization_expired') THEN
        PERFORM console_count(NEW.at, 'authorizations',
            CASE NEW.action WHEN 'authorization.completed' THEN 'completed'
                            WHEN 'authorization.declined' THEN 'declined'
                            WHEN 'authorization.failed' THEN 'failed'
                            ELSE 'expired' END, '');
    ELSIF NEW.action LIKE 'token\_api.%' AND NEW.actor LIKE 'service:%' THEN
        PERFORM console_count(NEW.at, 'token_api', substr(NEW.actor, 9), COALESCE(NEW.outcome, 'success'));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER console_counts_audit AFTER INSERT ON audit_log
    FOR EACH ROW EXECUTE FUNCTION console_counts_audit();

-- A transient refresh failure counts one more failure on the grant (`RECORD_REFRESH_FAILURE`;
-- its attempt began at `refresh_window_start`, the claim that counted it); a refresh the
-- provider refused for good moves the grant to `needs_reconsent` (`SET_GRANT_STATUS`).
CREATE FUNCTION console_counts_grants() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.refresh_failures > OLD.refresh_failures THEN
        PERFORM console_count(COALESCE(NEW.refresh_window_start, NEW.updated_at), 'refresh_failures',
                              NEW.provider, COALESCE(NEW.refresh_error, 'unknown'));
    ELSIF NEW.status = 'needs_reconsent' AND OLD.status <> 'needs_reconsent' THEN
        PERFORM console_count(NEW.updated_at, 'refresh_failures', NEW.provider,
                              COALESCE(NEW.refresh_error, 'needs_reconsent'));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER console_counts_grants AFTER UPDATE OF refresh_failures, status ON grants
    FOR EACH ROW EXECUTE FUNCTION console_counts_grants();

-- Browser sign-ins (a session row per sign-in).
CREATE FUNCTION console_counts_sign_ins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM console_count(NEW.created_at, 'sign_ins', '', '');
    RETURN NULL;
END $$;
CREATE TRIGGER console_counts_sign_ins AFTER INSERT ON browser_sessions
    FOR EACH ROW EXECUTE FUNCTION console_counts_sign_ins();

-- What happened before this migration, once (the audit log is append-only; the grants' past
-- failures are not recorded by hour, so they start counting now).
INSERT INTO console_counts (hour, series, label, sub, n)
SELECT at - at % 3600, 'authorizations',
       CASE action WHEN 'authorization.completed' THEN 'completed'
                   WHEN 'authorization.declined' THEN 'declined'
                   WHEN 'authorization.failed' THEN 'failed'
                   ELSE 'expired' END, '', COUNT(*)
FROM audit_log
WHERE action IN ('authorization.completed', 'authorization.declined', 'authorization.failed',
                 'authorization.expired', 'admin.authorization_expired')
GROUP BY 1, 3;
INSERT INTO console_counts (hour, series, label, sub, n)
SELECT at - at % 3600, 'token_api', substr(actor, 9), COALESCE(outcome, 'success'), COUNT(*)
FROM audit_log
WHERE action LIKE 'token\_api.%' AND actor LIKE 'service:%'
GROUP BY at - at % 3600, substr(actor, 9), COALESCE(outcome, 'success');
INSERT INTO console_counts (hour, series, label, sub, n)
SELECT created_at - created_at % 3600, 'sign_ins', '', '', COUNT(*)
FROM browser_sessions GROUP BY created_at - created_at % 3600;

-- Active browser sessions are counted by expiry.
CREATE INDEX browser_sessions_expires ON browser_sessions (expires_at);

-- Per-provider health: the last refresh that worked and the last that failed (and how), kept
-- as they happen, so the providers page reads one row per provider.
CREATE TABLE provider_health (
    provider TEXT PRIMARY KEY,
    last_success_at BIGINT,
    last_failure_at BIGINT,
    last_failure_kind TEXT
);
CREATE FUNCTION provider_health_refreshed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.action = 'grant.refreshed' AND NEW.provider IS NOT NULL THEN
        INSERT INTO provider_health (provider, last_success_at) VALUES (NEW.provider, NEW.at)
        ON CONFLICT (provider) DO UPDATE
            SET last_success_at = GREATEST(COALESCE(provider_health.last_success_at, 0), excluded.last_success_at);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER provider_health_refreshed AFTER INSERT ON audit_log
    FOR EACH ROW EXECUTE FUNCTION provider_health_refreshed();
CREATE FUNCTION provider_health_failed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.refresh_failures > OLD.refresh_failures THEN
        INSERT INTO provider_health (provider, last_failure_at, last_failure_kind)
        VALUES (NEW.provider, COALESCE(NEW.refresh_window_start, NEW.updated_at), COALESCE(NEW.refresh_error, 'unknown'))
        ON CONFLICT (provider) DO UPDATE
            SET last_failure_at = excluded.last_failure_at, last_failure_kind = excluded.last_failure_kind;
    ELSIF NEW.status = 'needs_reconsent' AND OLD.status <> 'needs_reconsent' THEN
        INSERT INTO provider_health (provider, last_failure_at, last_failure_kind)
        VALUES (NEW.provider, NEW.updated_at, COALESCE(NEW.refresh_error, 'needs_reconsent'))
        ON CONFLICT (provider) DO UPDATE
            SET last_failure_at = excluded.last_failure_at, last_failure_kind = excluded.last_failure_kind;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER provider_health_failed AFTER UPDATE OF refresh_failures, status ON grants
    FOR EACH ROW EXECUTE FUNCTION provider_health_failed();
INSERT INTO provider_health (provider, last_success_at)
SELECT provider, MAX(at) FROM audit_log WHERE action = 'grant.refreshed' AND provider IS NOT NULL GROUP BY provider;

-- Grants held back by a refresh backoff, per provider (the providers page counts them).
CREATE INDEX grants_backoff ON grants (provider, refresh_not_before) WHERE refresh_not_before IS NOT NULL;
-- A service's page: the consents users gave it, and its recent token-API answers.
CREATE INDEX client_consents_client ON client_consents (client_key, updated_at);
CREATE INDEX audit_log_actor ON audit_log (actor, id);
-- The authorizations list filtered by status, newest first (`store::console_lists`).
CREATE INDEX authorizations_status_created ON authorizations (status, created_at, id);
