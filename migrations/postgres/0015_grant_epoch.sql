-- Issue 11: servers keep each user's grants (with each client's consent, already covered by
-- 0012) between tool calls. A change to a grant — connected, refreshed, disconnected, renamed,
-- marked for reconsent — moves the same counter, so a server notices a change made by another
-- process (the admin CLI, another instance) and drops what it kept. Additive: an older server
-- ignores the counter. Per statement, like 0012.
CREATE TRIGGER auth_epoch_grants AFTER INSERT OR UPDATE OR DELETE ON grants
    FOR EACH STATEMENT EXECUTE FUNCTION bump_auth_epoch();
