-- Organizations: one broker serves many, each with its own people and services. Every database
-- made before this holds one customer's rows; they all become the default organization's, so an
-- upgrade changes nothing anyone sees (src/store/organizations/).
--
-- `id` is opaque ('org_' and a UUID's hex; the default is 'org_default') and never changes;
-- `slug` is what operators type (`--org acme`) and may be renamed.
CREATE TABLE organizations (
    id TEXT PRIMARY KEY,
    -- 1-64 of a-z 0-9 - (the provider id rule without '_'), unique.
    slug TEXT NOT NULL UNIQUE,
    -- For people: pages and the consent page name it.
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
INSERT INTO organizations (id, slug, name, created_at) VALUES ('org_default', 'default', 'Default organization', CAST(EXTRACT(EPOCH FROM now()) AS BIGINT));

-- Who belongs where. A user (an identity: issuer and subject) may belong to several
-- organizations; 'admin' may manage that organization's people and services, 'member' uses it.
-- The deployment's operators are `users.is_admin`, across every organization.
CREATE TABLE memberships (
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('member', 'admin')),
    created_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, user_id)
);
-- A user's organizations, and the members list in the order it pages (oldest first, then by id).
CREATE INDEX memberships_by_user ON memberships (user_id, organization_id);
CREATE INDEX memberships_page ON memberships (organization_id, created_at, user_id);

-- Every existing user is a member of the default organization; the deployment's admins are its
-- admins too. One pass over `users`, writing a row and two index entries per user (about 30 s
-- per million users on two cores).
INSERT INTO memberships (organization_id, user_id, role, created_at)
SELECT 'org_default', id, CASE WHEN is_admin <> 0 THEN 'admin' ELSE 'member' END, created_at FROM users;

-- A service (a tool server using the token API) belongs to one organization: it gets tokens of
-- that organization's members only. The constant default makes this a change of the schema
-- alone, whatever the table holds (PostgreSQL 11 and later write no row for it).
ALTER TABLE services ADD COLUMN organization_id TEXT NOT NULL DEFAULT 'org_default' REFERENCES organizations(id);
CREATE INDEX services_by_organization ON services (organization_id, name);

-- Servers keep who belongs where (every token-API request asks) under everyone's cache
-- generation: a changed role or a member removed moves `auth_epoch` (0012), so any process's
-- change reaches every server within its watcher's interval. Joining (INSERT) leaves it alone:
-- a user who is not a member is never kept.
CREATE TRIGGER auth_epoch_memberships AFTER UPDATE OR DELETE ON memberships
    FOR EACH ROW EXECUTE FUNCTION bump_auth_epoch();
