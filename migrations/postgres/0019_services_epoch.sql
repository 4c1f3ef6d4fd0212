-- Servers keep each service's row (the token API reads it on every request,
-- src/store/services.rs) under everyone's cache generation. A rotated secret, a changed
-- service or a removed one moves `auth_epoch` here like every other cached table (0012), so a
-- change made by any process — the admin CLI, another instance, hand-written SQL — reaches
-- every server within its watcher's interval; a server's own move is counted apart (0016's
-- `bump_auth_epoch()`). Per row: a statement that changes no service moves nothing.
-- Registering a service (INSERT) leaves the counter alone: an unknown service is never kept.
-- Additive: an older server ignores it.
CREATE TRIGGER auth_epoch_services AFTER UPDATE OR DELETE ON services
    FOR EACH ROW EXECUTE FUNCTION bump_auth_epoch();
