-- Consent per client (MCP security best practices §Confused deputy): the user's permission for
-- one MCP client to use one of their connections (a grant) with the scopes it carries. Another
-- client, or a grant that gained scopes, needs a new consent. Keyed by the grant, so
-- disconnecting a connection removes every consent to use it.
CREATE TABLE client_consents (
    grant_id TEXT NOT NULL REFERENCES grants(id) ON DELETE CASCADE,
    -- Which client, as its verified credential names it: "client:<client_id>" for OAuth clients
    -- (the broker's authorization server or the OIDC issuer's azp/client_id), "token:<label>"
    -- for tokens an operator issued with `admin tokens issue`.
    client_key TEXT NOT NULL,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    -- What the consent page showed as the client's name, for the connections page.
    client_name TEXT,
    -- Space separated: the scopes the user allowed this client to use.
    scopes TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (grant_id, client_key)
);
CREATE INDEX client_consents_user ON client_consents (user_id);

-- Which client an authorization is for, and what it asks: 'connect' runs the provider's OAuth
-- flow; 'consent' only asks the user to let this client use an existing grant (grant_id).
ALTER TABLE authorizations ADD COLUMN client_key TEXT NOT NULL DEFAULT '';
ALTER TABLE authorizations ADD COLUMN kind TEXT NOT NULL DEFAULT 'connect';
ALTER TABLE authorizations ADD COLUMN grant_id TEXT;
