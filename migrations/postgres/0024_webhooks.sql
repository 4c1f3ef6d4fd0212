-- Issue 27: webhooks for services. An operator gives a service an HTTPS endpoint; the broker
-- tells it what happens to its users' connections (src/events/webhooks).
--
-- The endpoint and its signing secret live on the service's row. The secret is sealed
-- (src/crypto.rs, bound to the service id); during a rotation the previous one stays valid
-- until `webhook_previous_until`, and both signatures are sent. A receiver that answered 410
-- disables its webhook (`webhook_disabled_at`) until the operator sets it again. Updating these
-- columns moves `auth_epoch` through 0019's triggers, so every server drops its cached view of
-- which providers have webhooks.
ALTER TABLE services ADD COLUMN webhook_url TEXT;
ALTER TABLE services ADD COLUMN webhook_secret_sealed BYTEA;
ALTER TABLE services ADD COLUMN webhook_previous_secret_sealed BYTEA;
ALTER TABLE services ADD COLUMN webhook_previous_until BIGINT;
ALTER TABLE services ADD COLUMN webhook_disabled_at BIGINT;

-- The webhook outbox: one row per event per service, written in the same transaction as the
-- change it reports, so a crash loses nothing. A row is claimed for one delivery attempt with
-- a compare-and-swap on `version` and a lease (`lease_holder`, `lease_until`), like refresh
-- leases: one instance delivers an attempt, and a killed instance's lease lapses.
CREATE TABLE webhook_events (
    -- Delivery order within (service, ordering_key): a later event waits for an earlier one.
    seq BIGSERIAL PRIMARY KEY,
    -- The `webhook-id` a receiver deduplicates by ('evt_' and 32 hex digits); the same event
    -- sent to two services has the same id.
    event_id TEXT NOT NULL,
    service_id TEXT NOT NULL REFERENCES services (id) ON DELETE CASCADE,
    event_type TEXT NOT NULL,
    -- The connection the event is about: user id and provider.
    ordering_key TEXT NOT NULL,
    -- Events that must be written once (an authorization that expired): a second insert of the
    -- same key for the same service is ignored.
    dedupe_key TEXT,
    -- The JSON body, as sent (ids, names and scopes; never a token).
    payload TEXT NOT NULL,
    -- pending | delivered | dead
    status TEXT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    -- What the last attempt met (an HTTP status or why there was none); never a body.
    last_error TEXT,
    lease_holder TEXT,
    lease_until BIGINT,
    version BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    finished_at BIGINT
);
CREATE UNIQUE INDEX webhook_events_event ON webhook_events (event_id, service_id);
CREATE UNIQUE INDEX webhook_events_dedupe ON webhook_events (service_id, dedupe_key);
CREATE INDEX webhook_events_due ON webhook_events (status, next_attempt_at);
CREATE INDEX webhook_events_order ON webhook_events (service_id, ordering_key, status, seq);
CREATE INDEX webhook_events_listing ON webhook_events (service_id, seq);
