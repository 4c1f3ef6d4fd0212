-- The admin console at a million rows: every list pages by keyset over one of these indexes
-- (its sort order, `store::paging`), every dashboard count and sweep filters on an indexed
-- status, and start-up asks which keys seal values by walking the key-id indexes (a few
-- lookups per column) instead of reading every sealed value. Additive: an older server
-- ignores them.
CREATE INDEX users_created ON users (created_at, id);
CREATE INDEX users_admins ON users (id) WHERE is_admin <> 0;
CREATE INDEX users_disabled ON users (id) WHERE disabled_at IS NOT NULL;
CREATE INDEX grants_created ON grants (created_at, id);
CREATE INDEX grants_status ON grants (status);
CREATE INDEX authorizations_created ON authorizations (created_at, id);
CREATE INDEX authorizations_status ON authorizations (status, expires_at);
CREATE INDEX client_consents_updated ON client_consents (updated_at, grant_id, client_key);
CREATE INDEX oauth_clients_created ON oauth_clients (created_at, client_id);
-- A stopping server gives up its refresh leases (`release_refresh_leases_of`) without a scan.
CREATE INDEX grants_lease_holder ON grants (refresh_lease_holder) WHERE refresh_lease_holder IS NOT NULL;
-- The key id a sealed value names (bytes 2..9), spelled exactly as `store::sealed` asks.
CREATE INDEX grants_access_key ON grants ((encode(substring(access_token_sealed from 2 for 8), 'hex')));
CREATE INDEX grants_refresh_key ON grants ((encode(substring(refresh_token_sealed from 2 for 8), 'hex')));
CREATE INDEX authorizations_pkce_key ON authorizations ((encode(substring(pkce_verifier_sealed from 2 for 8), 'hex')));
