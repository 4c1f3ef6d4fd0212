-- Issue 26: a server that acts as the user (auth_kind provider, mcp_oauth, token_exchange) may
-- list one user's own data as resources (note titles, file names). Those are now read over each
-- user's own connection when that user lists (src/mcp/gateway/own_resources.rs) and never
-- stored: the rows 0037 kept for such servers lose their resources (their templates stay), so
-- no user's list is left in the database for another to be shown. The version moves, so every
-- instance takes the row again. A row that does not parse is removed; the next read stores it.
DO $$
DECLARE
    stored RECORD;
BEGIN
    FOR stored IN
        SELECT l.server_id, l.listed FROM gateway_server_lists l JOIN gateway_servers s ON s.id = l.server_id
        WHERE l.kind = 'resources' AND s.auth_kind IN ('provider', 'mcp_oauth', 'token_exchange')
    LOOP
        BEGIN
            IF jsonb_typeof(stored.listed::jsonb) <> 'object' THEN
                RAISE invalid_text_representation;
            END IF;
            UPDATE gateway_server_lists
            SET listed = jsonb_set(stored.listed::jsonb, '{resources}', '[]'::jsonb)::text, version = version + 1
            WHERE server_id = stored.server_id AND kind = 'resources';
        -- Not JSON, not an object, or text PostgreSQL's jsonb cannot hold (a NUL escape).
        EXCEPTION WHEN data_exception THEN
            DELETE FROM gateway_server_lists WHERE server_id = stored.server_id AND kind = 'resources';
        END;
    END LOOP;
END $$;
