-- Bring your own OAuth app: an organization's own client registration at a provider, used for
-- its members' connections there instead of the operator's (src/store/organizations/apps.rs).
--
-- Every change is a new version (a row); a version never changes, except that it is retired
-- when a newer one replaces it or the organization removes it, and that `admin keys rewrap`
-- re-seals its secret. A grant remembers the version that issued it (`grants.app_id`), so a
-- new client id applies to new connections while the old ones keep refreshing with theirs.
CREATE TABLE provider_apps (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    provider TEXT NOT NULL,
    -- 1, 2, … per (organization, provider).
    version BIGINT NOT NULL,
    client_id TEXT NOT NULL,
    -- Sealed like tokens (bound to this row and its organization); NULL for a public client.
    client_secret_sealed BLOB,
    -- Space separated; NULL asks for the operator's default scopes.
    scopes TEXT,
    -- The catalogue entry's template values ({"tenant": "…"}), a JSON object.
    template_values TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    retired_at BIGINT,
    UNIQUE (organization_id, provider, version)
);
-- At most one version in use per (organization, provider): the one new connections get.
CREATE UNIQUE INDEX provider_apps_current ON provider_apps (organization_id, provider) WHERE retired_at IS NULL;
-- `admin keys status / rewrap / forget` find sealed values by their key.
CREATE INDEX provider_apps_secret_key ON provider_apps (lower(hex(substr(client_secret_sealed, 2, 8))));

-- Which organization an authorization acts in (whose app its provider trip uses, whose consent
-- page it is) and the app version it was sent to the provider with (NULL: the operator's).
-- Constant defaults: a change of the schema alone, whatever the tables hold.
ALTER TABLE authorizations ADD COLUMN organization_id TEXT NOT NULL DEFAULT 'org_default';
ALTER TABLE authorizations ADD COLUMN app_id TEXT;
-- Which organization a grant was made in, and the app version that issued its tokens (NULL:
-- the operator's app): its refreshes, revocation and API calls use that app.
ALTER TABLE grants ADD COLUMN organization_id TEXT NOT NULL DEFAULT 'org_default';
ALTER TABLE grants ADD COLUMN app_id TEXT;
CREATE INDEX grants_by_app ON grants (app_id) WHERE app_id IS NOT NULL;

-- The demo provider's registered clients besides the broker's own (`admin demo add-client`), so
-- a newcomer can give each organization its own app. The secret is kept as its SHA-256.
CREATE TABLE demo_clients (
    client_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    secret_hash TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
