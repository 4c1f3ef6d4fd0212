-- Gateway mode (issue 26, item 5): the user approves each (client, server) pair before a client
-- may call a server behind the broker, on the same consent pages as everything else. One row per
-- approval; withdrawing deletes it, and removing the server (or the user) removes its rows.
-- `client_key` is the client as its verified credential names it, as in `client_consents`
-- (0004). The trigger moves `auth_epoch` (0012), so a server that keeps approvals between calls
-- notices an approval or a withdrawal made by another process. Additive: an older server
-- ignores the table and the column.
CREATE TABLE gateway_consents (
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    client_key TEXT NOT NULL,
    server_id TEXT NOT NULL REFERENCES gateway_servers(id) ON DELETE CASCADE,
    -- What the consent page showed as the client's name, for the connections page.
    client_name TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, client_key, server_id)
);
CREATE INDEX gateway_consents_server ON gateway_consents (server_id);
CREATE TRIGGER auth_epoch_gateway_consents AFTER INSERT OR UPDATE OR DELETE ON gateway_consents
    FOR EACH STATEMENT EXECUTE FUNCTION bump_auth_epoch();

-- The server whose (client, server) pair an authorization also approves: set on 'connect' and
-- 'consent' rows a server's tool call opened (one visit approves the pair and connects), and on
-- 'server' rows, which approve only the pair (no provider, no grant).
ALTER TABLE authorizations ADD COLUMN server_id TEXT;
