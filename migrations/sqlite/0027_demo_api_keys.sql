-- The demo provider's API keys (src/demo_provider/keys.rs): what it issues on its key page for
-- the broker's API-key connections to be tried offline and tested against a strict validator.
-- Only the SHA-256 of a key is stored. A revoked key stays (its row says it was revoked, so the
-- API can say why it refuses it). Additive: an older server never reads it.
CREATE TABLE demo_api_keys (
    key_hash TEXT PRIMARY KEY,
    account TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
