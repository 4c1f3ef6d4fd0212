-- Issue 11: servers keep each user's grants (with each client's consent, already covered by
-- 0012) between tool calls. A change to a grant — connected, refreshed, disconnected, renamed,
-- marked for reconsent — moves the same counter, so a server notices a change made by another
-- process (the admin CLI, another instance) and drops what it kept. Additive: an older server
-- ignores the counter.
CREATE TRIGGER auth_epoch_grants_insert AFTER INSERT ON grants
BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_grants_update AFTER UPDATE ON grants
BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_grants_delete AFTER DELETE ON grants
BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
