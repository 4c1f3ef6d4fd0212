-- Gateway servers whose calls carry a token the broker mints for a registered token-API service
-- (issue 26, `--auth token-exchange`): the service (`services.id`) the server is tied to. Each
-- call carries a short-lived token for that service's resource, which the server exchanges at
-- `/token` with its own service credentials (src/mcp/gateway/minted.rs). No foreign key: a
-- removed service leaves the server registered, and its calls refused with a clear answer.
-- Additive: an older server ignores the column, and refuses the new auth kind as corrupt.
ALTER TABLE gateway_servers ADD COLUMN service_id TEXT;
