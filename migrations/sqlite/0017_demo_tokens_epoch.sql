-- Issue 11: servers keep the demo provider's live access tokens between API calls and drop
-- them when `auth_epoch` moves (0012). A revocation — an UPDATE that sets `revoked_at` — or a
-- deleted token moves the counter here like every other cached table, so a revocation made by
-- any process (another instance, hand-written SQL) reaches every server, and a server's own
-- move is counted apart (0016: its connections copy these triggers). Issuing a token (INSERT)
-- leaves the counter alone: an unknown token is never kept. Additive: an older server ignores it.
CREATE TRIGGER auth_epoch_demo_tokens_update AFTER UPDATE ON demo_tokens
BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_demo_tokens_delete AFTER DELETE ON demo_tokens
BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
