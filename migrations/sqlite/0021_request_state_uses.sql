-- MCP 2026-07-28 multi round-trip requests (src/mcp/input_required/): a sealed `requestState`
-- that carried a question is single use, on every instance. Its nonce is written here when the
-- answer to it is acted on; a second retry with the same state finds the row and is refused.
-- Rows are kept until the state itself has expired (after that it is refused anyway), and are
-- removed by the next use after that. Additive: an older server never reads it.
CREATE TABLE request_state_uses (
    nonce TEXT PRIMARY KEY,
    expires_at BIGINT NOT NULL
);
CREATE INDEX request_state_uses_expiry ON request_state_uses (expires_at);
