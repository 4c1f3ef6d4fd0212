-- Operators (issue 10): an admin may open /admin; a disabled user can neither sign in nor use a
-- bearer token. `is_admin` is 0 or 1 (BIGINT: read alike through sqlx Any on both backends).
-- `disabled_at` is when an admin disabled the account (NULL: enabled).
ALTER TABLE users ADD COLUMN is_admin BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN disabled_at BIGINT;
