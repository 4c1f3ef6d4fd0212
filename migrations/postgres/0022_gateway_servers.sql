-- Gateway mode (issue 26): MCP servers run by others, registered by an operator, whose tools
-- the broker serves under a prefix on /mcp and calls per user with that user's credential
-- (src/store/gateway_servers.rs, src/mcp/gateway/). Running servers learn of a change through
-- `auth_epoch` (0012): the trigger below moves it on every insert, update and delete (0016's
-- `bump_auth_epoch()`, which counts a server's own moves apart), so a server added or removed
-- by the admin CLI or another instance reaches every server within its generation watcher's
-- interval. Additive: an older server ignores it.
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
    secret_sealed BYTEA,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE TRIGGER auth_epoch_gateway_servers AFTER INSERT OR UPDATE OR DELETE ON gateway_servers
    FOR EACH ROW EXECUTE FUNCTION bump_auth_epoch();
