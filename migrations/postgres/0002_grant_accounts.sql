-- Several accounts per provider: a grant is keyed by (user, provider, account label), where ''
-- is an account whose provider gave no name (NOT NULL, so the key stays unique: NULLs would
-- never conflict). Rows keep their ids, which their sealed tokens are bound to.
UPDATE grants SET account_label = '' WHERE account_label IS NULL;
ALTER TABLE grants ALTER COLUMN account_label SET DEFAULT '';
ALTER TABLE grants ALTER COLUMN account_label SET NOT NULL;
-- The name PostgreSQL gave `UNIQUE (user_id, provider)` in 0001.
ALTER TABLE grants DROP CONSTRAINT grants_user_id_provider_key;
ALTER TABLE grants ADD CONSTRAINT grants_user_id_provider_account_label_key UNIQUE (user_id, provider, account_label);
