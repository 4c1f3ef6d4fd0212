-- Gateway servers protected by MCP authorization (issue 26, `--auth mcp-oauth`): what discovery
-- found and how the broker is registered there (issuer, endpoints, the server's canonical URL
-- as RFC 8707 resource, client_id, token endpoint authentication), as one JSON object read by
-- src/store/gateway_servers.rs. A client secret, if the registration has one, is sealed in
-- `secret_sealed`, so key rewrap and `keys forget` treat it as a secret header's. Additive: an
-- older server ignores the column, and refuses the new auth kind as corrupt.
ALTER TABLE gateway_servers ADD COLUMN oauth TEXT;
