-- Gateway mode (issue 26): each server's lists as last read from it, so that every instance,
-- and this one after a restart, lists a server's tools, prompts and resources before any of its
-- own users connected to that server (src/store/gateway_lists.rs, src/mcp/gateway/shared_lists.rs).
-- An instance that reads a list that differs from what it held writes it here and signals the
-- others, which read it back. What is kept is the server's own answer (its names and URIs,
-- before the prefix and the gateway's URI scheme are applied). Removed with the server.
-- Additive: an older server ignores the table.
CREATE TABLE gateway_server_lists (
    server_id TEXT NOT NULL REFERENCES gateway_servers(id) ON DELETE CASCADE,
    -- 'tools', 'prompts' or 'resources' (resources and resource templates together).
    kind TEXT NOT NULL,
    -- The server's answer, as JSON.
    listed TEXT NOT NULL,
    -- Moves by one on every write: an instance takes a row only if it is newer than the one
    -- its list came from, so a signal it hears late never takes it back to an older list.
    version BIGINT NOT NULL,
    -- When an instance last stored a changed list (seconds).
    stored_at BIGINT NOT NULL,
    PRIMARY KEY (server_id, kind)
);
