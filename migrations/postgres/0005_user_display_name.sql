-- An external (OIDC) user's name for display, from the ID token at sign-in (`name`, else
-- `preferred_username`, else `email`). Never used to identify anyone: that is (issuer, subject).
ALTER TABLE users ADD COLUMN display_name TEXT;
