-- Gateway mode: the admin page of one server behind the broker lists its newest approvals, so
-- they are read by server then time (newest first, the page's LIMIT taken from the index's end)
-- rather than sorted from every approval of the server. The index on the server alone is
-- covered by this one's first column (deletes cascading from a removed server use it).
-- Additive: an older server ignores the index.
CREATE INDEX gateway_consents_server_created ON gateway_consents (server_id, created_at);
DROP INDEX gateway_consents_server;
