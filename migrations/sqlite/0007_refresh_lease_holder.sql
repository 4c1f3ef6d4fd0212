-- When the stored tokens were issued, so the refresh margin can be a share of their lifetime
-- (a 30-second token is not "about to expire" for its whole life); NULL for rows from before.
ALTER TABLE grants ADD COLUMN issued_at INTEGER;
-- Which running process holds the refresh lease: it renews and releases only its own, and
-- takes back at once one that an interrupted refresh of its own left behind.
ALTER TABLE grants ADD COLUMN refresh_lease_holder TEXT;
