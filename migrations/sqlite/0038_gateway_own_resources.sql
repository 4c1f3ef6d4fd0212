-- Issue 26: a server that acts as the user (auth_kind provider, mcp_oauth, token_exchange) may
-- list one user's own data as resources (note titles, file names). Those are now read over each
-- user's own connection when that user lists (src/mcp/gateway/own_resources.rs) and never
-- stored: the rows 0037 kept for such servers lose their resources (their templates stay), so
-- no user's list is left in the database for another to be shown. The version moves, so every
-- instance takes the row again. A row that does not parse is removed; the next read stores it.
UPDATE gateway_server_lists
SET listed = json_set(listed, '$.resources', json('[]')), version = version + 1
WHERE kind = 'resources'
  AND CASE WHEN json_valid(listed) THEN json_type(listed) = 'object' ELSE 0 END
  AND server_id IN (SELECT id FROM gateway_servers WHERE auth_kind IN ('provider', 'mcp_oauth', 'token_exchange'));
DELETE FROM gateway_server_lists
WHERE kind = 'resources'
  AND NOT CASE WHEN json_valid(listed) THEN json_type(listed) = 'object' ELSE 0 END
  AND server_id IN (SELECT id FROM gateway_servers WHERE auth_kind IN ('provider', 'mcp_oauth', 'token_exchange'));
