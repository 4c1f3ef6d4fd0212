-- Timestamps are Unix seconds, bound from Rust (the clock is injected).
CREATE TABLE users (
    id TEXT PRIMARY KEY,
    issuer TEXT NOT NULL,
    subject TEXT NOT NULL,
    username TEXT UNIQUE,
    password_hash TEXT,
    created_at BIGINT NOT NULL,
    UNIQUE (issuer, subject)
);

-- Browser sign-in sessions. Only a hash of the cookie value is stored.
CREATE TABLE browser_sessions (
    id_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    csrf_token TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX browser_sessions_user ON browser_sessions(user_id);

-- The broker's own JWT signing keys; private halves sealed.
CREATE TABLE signing_keys (
    kid TEXT PRIMARY KEY,
    algorithm TEXT NOT NULL,
    private_key_sealed BLOB NOT NULL,
    public_key BLOB NOT NULL,
    created_at BIGINT NOT NULL,
    retired_at BIGINT
);

-- Third-party tokens, sealed, one row per (user, provider).
CREATE TABLE grants (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    provider TEXT NOT NULL,
    account_label TEXT,
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
    UNIQUE (user_id, provider)
);

-- One row per connect attempt; its id is the MCP elicitationId.
CREATE TABLE authorizations (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    provider TEXT NOT NULL,
    scopes TEXT NOT NULL,
    client_name TEXT,
    mcp_session TEXT,
    status TEXT NOT NULL,
    state_hash TEXT UNIQUE,
    browser_session_hash TEXT,
    pkce_verifier_sealed BLOB,
    failure TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX authorizations_user ON authorizations(user_id, provider);

CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at BIGINT NOT NULL,
    user_id TEXT,
    action TEXT NOT NULL,
    provider TEXT,
    detail TEXT
);

-- The built-in demo provider's own state (it plays a third party).
CREATE TABLE demo_codes (
    code_hash TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    scopes TEXT NOT NULL,
    account TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT
);

CREATE TABLE demo_tokens (
    token_hash TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    family_id TEXT NOT NULL,
    client_id TEXT NOT NULL,
    account TEXT NOT NULL,
    scopes TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX demo_tokens_family ON demo_tokens(family_id);

CREATE TABLE demo_notes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    account TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
