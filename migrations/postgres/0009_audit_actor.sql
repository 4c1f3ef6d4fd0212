-- Operators (issue 10): every audit entry says who acted and how it ended. `actor` is
-- `user:<id>`, `admin:<id>`, `cli`, `client:<id>`, `service:<id>`, `issuer`, `broker` or
-- `visitor`; `outcome` is `success`, `failure` or `refused`. Rows written before this
-- migration are backfilled by the rules store::audit::implied_actor and Outcome::of_action
-- apply to callers that do not name an actor; their `detail` is left as written (the log is
-- append-only).
ALTER TABLE audit_log ADD COLUMN actor TEXT;
ALTER TABLE audit_log ADD COLUMN outcome TEXT;

UPDATE audit_log SET actor = CASE
    WHEN action LIKE 'admin.%' AND (detail LIKE 'actor=cli%' OR detail LIKE '% actor=cli%') THEN 'cli'
    WHEN action LIKE 'admin.%' AND detail LIKE 'actor=%' AND strpos(detail, ' ') > 7
        THEN 'admin:' || substr(detail, 7, strpos(detail, ' ') - 7)
    WHEN action = 'browser.sign_in_failed' THEN 'visitor'
    WHEN action IN ('oauth_client.registered', 'oauth_grant.revoked_by_client', 'grant.refreshed',
                    'grant.needs_reconsent', 'oauth_grant.revoked_on_reuse', 'authorization.failed') THEN 'broker'
    WHEN action IN ('service.added', 'service.removed', 'service.secret_rotated') THEN 'cli'
    WHEN action = 'user.admin_from_claim' THEN 'issuer'
    WHEN action = 'consent.revoked' AND detail LIKE '% by=admin%' THEN 'cli'
    WHEN user_id IS NOT NULL THEN 'user:' || user_id
    ELSE 'broker'
END;

UPDATE audit_log SET outcome = CASE
    WHEN action LIKE 'admin.%' THEN 'success'
    WHEN action LIKE '%refused' OR action LIKE '%declined' OR action LIKE '%sign_in_failed' THEN 'refused'
    WHEN action LIKE '%failed%' OR action LIKE '%needs_reconsent%' OR action LIKE '%expired%' OR action LIKE '%reuse%'
        THEN 'failure'
    ELSE 'success'
END;

CREATE INDEX audit_log_user ON audit_log(user_id, id);
CREATE INDEX audit_log_outcome ON audit_log(outcome, id);
