-- Several accounts per provider: a grant is keyed by (user, provider, account label), where ''
-- is an account whose provider gave no name (NOT NULL, so the key stays unique: NULLs would
-- never conflict). SQLite cannot change a UNIQUE constraint in place, so the table is rebuilt:
-- create, copy, drop, rename. Rows keep their ids, which their sealed tokens are bound to.
CREATE TABLE grants_new (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    provider TEXT NOT NULL,
    account_label TEXT NOT NULL DEFAULT '',
    scopes TEXT NOT NULL,
    access_token_sealed BLOB NOT NULL,
    refresh_token_sealed BLOB,
    key_id TEXT NOT NULL,
    expires_at BIGINT,
    status TEXT NOT NULL,
    version BIGINT NOT NULL,
    refresh_lease_until BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (user_id, provider, account_label)
);

INSERT INTO grants_new (id, user_id, provider, account_label, scopes, access_token_sealed, refresh_token_sealed,
                        key_id, expires_at, status, version, refresh_lease_until, created_at, updated_at)
SELECT id, user_id, provider, COALESCE(account_label, ''), scopes, access_token_sealed, refresh_token_sealed,
       key_id, expires_at, status, version, refresh_lease_until, created_at, updated_at
FROM grants;

DROP TABLE grants;
ALTER TABLE grants_new RENAME TO grants;
