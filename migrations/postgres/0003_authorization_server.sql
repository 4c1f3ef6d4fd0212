-- The built-in OAuth 2.1 authorization server for MCP clients (identity mode "local").
-- Codes, secrets and refresh tokens are stored only as SHA-256 hashes (hex).

-- Clients registered through RFC 7591 dynamic registration. Clients identified by a client ID
-- metadata document (an https URL) are not stored here: their document is fetched and cached.
CREATE TABLE oauth_clients (
    client_id TEXT PRIMARY KEY,
    -- NULL for public clients (token_endpoint_auth_method "none").
    client_secret_hash TEXT,
    token_endpoint_auth_method TEXT NOT NULL,
    client_name TEXT,
    -- JSON array of the exact redirect URI strings.
    redirect_uris TEXT NOT NULL,
    -- Space separated.
    grant_types TEXT NOT NULL,
    -- Space separated; NULL when the client registered no scope.
    scope TEXT,
    created_at BIGINT NOT NULL
);

-- One row per approval of a client by a user. Every code and refresh token descends from one
-- grant; revoking it (a replayed code or refresh token) kills all of them.
CREATE TABLE oauth_grants (
    id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    scope TEXT NOT NULL,
    resource TEXT NOT NULL,
    -- 1 when the client may use the refresh_token grant.
    refresh_allowed BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX oauth_grants_user ON oauth_grants(user_id);

-- Authorization codes: 60 s, single use (used_at is set by compare-and-swap).
CREATE TABLE oauth_codes (
    code_hash TEXT PRIMARY KEY,
    grant_id TEXT NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
    redirect_uri TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT
);
CREATE INDEX oauth_codes_grant ON oauth_codes(grant_id);

-- Refresh tokens, rotated on every use (rotated_at is set by compare-and-swap).
CREATE TABLE oauth_refresh_tokens (
    token_hash TEXT PRIMARY KEY,
    grant_id TEXT NOT NULL REFERENCES oauth_grants(id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    rotated_at BIGINT
);
CREATE INDEX oauth_refresh_tokens_grant ON oauth_refresh_tokens(grant_id);
