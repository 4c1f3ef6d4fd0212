-- Providers (issue 12).
-- Each provider has its own callback, /oauth/callback/{provider} (RFC 9700 §4.4.2): the
-- redirect URI an authorization was sent with is kept, so its response is taken only there and
-- the code is exchanged with exactly that URI. NULL: sent before the upgrade, with the shared
-- /oauth/callback, which still answers for those rows.
ALTER TABLE authorizations ADD COLUMN redirect_uri TEXT;
-- The account a grant belongs to is the provider's stable subject (GitHub's numeric id, not
-- the renameable login); account_label stays beside it as the name shown. '' for grants from
-- before, and for providers that name no account.
ALTER TABLE grants ADD COLUMN account_id TEXT NOT NULL DEFAULT '';
-- A per-grant API base the provider returned with the token (Salesforce instance_url); NULL:
-- the provider's configured api_base_url.
ALTER TABLE grants ADD COLUMN api_base_url TEXT;
