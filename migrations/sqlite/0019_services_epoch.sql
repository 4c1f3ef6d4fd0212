-- Servers keep each service's row (the token API reads it on every request,
-- src/store/services.rs) under everyone's cache generation. A rotated secret, a changed
-- service or a removed one moves `auth_epoch` here like every other cached table (0012), so a
-- change made by any process — the admin CLI, another instance, hand-written SQL — reaches
-- every server within its watcher's interval; a server's own move is counted apart (0016: its
-- connections copy these triggers). Registering a service (INSERT) leaves the counter alone:
-- an unknown service is never kept. Additive: an older server ignores it.
CREATE TRIGGER auth_epoch_services_update AFTER UPDATE ON services
BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER auth_epoch_services_delete AFTER DELETE ON services
BEGIN UPDATE auth_epoch SET n = n + 1 WHERE id = 1; END;
