-- Issue 11: servers keep the demo provider's live access tokens between API calls and drop
-- them when `auth_epoch` moves (0012). A revocation — an UPDATE that sets `revoked_at` — or a
-- deleted token moves the counter here like every other cached table, so a revocation made by
-- any process (another instance, hand-written SQL) reaches every server, and a server's own
-- move is counted apart (0016's `bump_auth_epoch()`). Per row, unlike 0012's per-statement
-- triggers: a statement that revokes nothing (a token already revoked) moves nothing. Issuing
-- a token (INSERT) leaves the counter alone: an unknown token is never kept. Additive: an older
-- server ignores it.
CREATE TRIGGER auth_epoch_demo_tokens AFTER UPDATE OR DELETE ON demo_tokens
    FOR EACH ROW EXECUTE FUNCTION bump_auth_epoch();
