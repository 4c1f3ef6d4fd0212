-- Registered tool servers ("services"): programs that obtain a user's third-party tokens from
-- the token API (src/api) instead of through MCP. A service authenticates with HTTP Basic
-- (client id, client secret); only the SHA-256 of the secret is stored (256 random bits, so a
-- fast hash is enough and a database reader cannot use it). For consent a service is a client
-- like any other: client_consents.client_key = 'service:' || id.
CREATE TABLE services (
    -- The client id: 'svc_' || name.
    id TEXT PRIMARY KEY,
    -- 1-64 of a-z 0-9 - _ (the provider id rule).
    name TEXT NOT NULL UNIQUE,
    -- Space separated: the providers whose tokens the service may ask for.
    providers TEXT NOT NULL,
    -- The audience a user's access token must name to be accepted from this service (RFC 8707);
    -- NULL when none was registered.
    resource TEXT,
    -- 1: the service may only call providers through the proxy, never receive a raw token.
    proxy_only BIGINT NOT NULL,
    -- 1: the service may name a user by id instead of presenting the user's access token.
    trusted BIGINT NOT NULL,
    -- sha256_hex of the client secret.
    secret_hash TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
