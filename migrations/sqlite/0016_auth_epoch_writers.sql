-- Issue 11: which process moved `auth_epoch` (0012, 0015). A server drops its caches at once
-- after its own writes; when its watcher then saw the counter move it could not tell its own
-- moves from another process's and dropped everything a second time. Each server counts its own
-- moves here under an id of its own, in the same transaction as the counter: the counter minus
-- the server's own row is exactly what every other writer did. On SQLite the server's
-- connections add TEMP triggers that move their row beside the triggers of 0012 and 0015
-- (SQLite has no session variable a trigger here could read); other writers (the admin CLI's
-- own id, hand-written SQL with none) only move the counter. Additive: an older server ignores it.
CREATE TABLE auth_epoch_writers (
    writer TEXT PRIMARY KEY,
    n BIGINT NOT NULL
);
