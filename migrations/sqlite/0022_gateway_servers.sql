-- Gateway mode (issue 26): MCP servers run by others, registered by an operator, whose tools
-- the broker serves under a prefix on /mcp and calls per user with that user's credential
-- (src/store/gateway_servers.rs, src/mcp/gateway/). Running servers learn of a change through
-- `auth_epoch` (0012): the triggers below move it on every insert, update and delete, so a
-- server added or removed by the admin CLI or another instance reaches every server within
-- its generation watcher's interval. Additive: an older server ignores it.
CREATE TABLE gateway_servers (
    id TEXT PRIMARY KEY,
    -- 1-32 of a-z 0-9 -.
    name TEXT NOT NULL UNIQUE,
    -- The server's MCP endpoint: https, or http on a loopback host.
    url TEXT NOT NULL,
    -- Put before each of the server's tool names; no two servers' prefixes overlap.
    prefix TEXT NOT NULL UNIQUE,
    -- 'provider', 'none' or 'secret_header'.
    auth_kind TEXT NOT NULL,
    -- provider: the catalogue provider whose token is injected, and the scopes it must carry
    -- (space separated).
    provider TEXT,
    scopes TEXT NOT NULL DEFAULT '',
    -- provider and secret_header: the header the credential goes in; provider: its scheme.
    header_name TEXT,
    header_scheme TEXT,
    -- secret_header: the operator's secret, sealed (AAD: table, column, id).
    secret_sealed BLOB,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE TRIGGER auth_epoch_gateway_servers_insert AFTER INSERT ON gateway_servers
BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_gateway_servers_update AFTER UPDATE ON gateway_servers
BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_gateway_servers_delete AFTER DELETE ON gateway_servers
BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
