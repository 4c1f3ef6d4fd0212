//! Webhook events: what happened to a connection, as a service's receiver reads it, and the
//! one statement that writes an event into the outbox ([`crate::store::webhooks::outbox`]),
//! fanned out to every service with a live webhook that may use the provider.
//!
//! An event is a [`Note`]: the write it reports runs beside it in one transaction when some
//! service listens ([`crate::store::machinery::write`]), so a change is never committed without
//! its event nor an event without its change. Whether anyone listens is read from the cached
//! webhook targets ([`crate::store::webhooks::endpoints`]): with no webhook anywhere a noted
//! write costs nothing more than its plain statement.

use crate::clock::{Timestamp, iso_time};
use crate::store::machinery::cache_effect::CacheEffect;
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::store::Store;
use crate::store::machinery::transaction::Transaction;
use crate::store::machinery::write::{Note, On, Write};

/// What happened, as the `type` a receiver reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    ConnectionCreated,
    ConnectionUpdated,
    ConnectionRefreshFailed,
    ConnectionRecovered,
    ConnectionNeedsReauthorization,
    ConnectionRevoked,
    AuthorizationCompleted,
    AuthorizationDeclined,
    AuthorizationExpired,
}

impl EventType {
    pub const ALL: [EventType; 9] = [
        EventType::ConnectionCreated,
        EventType::ConnectionUpdated,
        EventType::ConnectionRefreshFailed,
        EventType::ConnectionRecovered,
        EventType::ConnectionNeedsReauthorization,
        EventType::ConnectionRevoked,
        EventType::AuthorizationCompleted,
        EventType::AuthorizationDeclined,
        EventType::AuthorizationExpired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::ConnectionCreated => "connection.created",
            EventType::ConnectionUpdated => "connection.updated",
            EventType::ConnectionRefreshFailed => "connection.refresh_failed",
            EventType::ConnectionRecovered => "connection.recovered",
            EventType::ConnectionNeedsReauthorization => "connection.needs_reauthorization",
            EventType::ConnectionRevoked => "connection.revoked",
            EventType::AuthorizationCompleted => "authorization.completed",
            EventType::AuthorizationDeclined => "authorization.declined",
            EventType::AuthorizationExpired => "authorization.expired",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == text)
    }
}

/// An event to write: the connection it is about and what its type needs (`data`, merged into
/// the body's `data` beside `user_id` and `provider`). Never a token.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub event_type: EventType,
    pub user_id: String,
    pub provider: String,
    pub data: serde_json::Map<String, serde_json::Value>,
    /// Only this service hears of it (an authorization it caused); else every service with a
    /// webhook that may use the provider.
    pub service_id: Option<String>,
}

impl NewEvent {
    pub fn new(event_type: EventType, user_id: &str, provider: &str) -> Self {
        Self {
            event_type,
            user_id: user_id.to_owned(),
            provider: provider.to_owned(),
            data: serde_json::Map::new(),
            service_id: None,
        }
    }

    pub fn with(mut self, key: &str, value: impl Into<serde_json::Value>) -> Self {
        self.data.insert(key.to_owned(), value.into());
        self
    }

    /// The body receivers get: Standard Webhooks' `type`, `timestamp` and `data`, plus the id.
    pub(in crate::store) fn body(&self, event_id: &str, now: Timestamp) -> String {
        let mut data = serde_json::Map::new();
        data.insert("user_id".into(), self.user_id.clone().into());
        data.insert("provider".into(), self.provider.clone().into());
        data.extend(self.data.clone());
        serde_json::json!({
            "id": event_id,
            "type": self.event_type.as_str(),
            "timestamp": iso_time(now),
            "data": data,
        })
        .to_string()
    }

    pub(in crate::store) fn ordering_key(&self) -> String {
        format!("{}\u{1f}{}", self.user_id, self.provider)
    }
}

/// A new event id: `evt_` and 128 random bits.
pub(in crate::store) fn new_event_id() -> String {
    format!("evt_{}", uuid::Uuid::new_v4().simple())
}

/// `_` is a LIKE wildcard and provider ids may contain it.
pub(in crate::store) fn provider_pattern(provider: &str) -> String {
    format!("% {} %", provider.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"))
}

/// Writes one event into the outbox, fanned out to every service with a live webhook that may
/// use the provider (or the one service named), in one statement: how many services it reached.
/// Only services of an organization the user belongs to hear of it: a service learns nothing of
/// people outside its organization, by webhook either.
/// A `dedupe_key` already written for a service is [`StoreError::Conflict`].
pub(in crate::store) struct InsertEvent<'a> {
    pub(in crate::store) event: &'a NewEvent,
    pub(in crate::store) event_id: &'a str,
    pub(in crate::store) dedupe_key: Option<&'a str>,
    pub(in crate::store) now: Timestamp,
}

impl Write for InsertEvent<'_> {
    type Done = u64;

    async fn run(&self, on: On<'_, '_>) -> StoreResult<u64> {
        let insert = sqlx::query(
            "INSERT INTO webhook_events (event_id, service_id, event_type, ordering_key, dedupe_key, payload, status, attempts, next_attempt_at, version, created_at) \
             SELECT $1, id, $2, $3, $4, $5, 'pending', 0, $6, 0, $6 FROM services \
             WHERE webhook_url IS NOT NULL AND webhook_disabled_at IS NULL \
             AND (' ' || providers || ' ') LIKE $7 ESCAPE '\\' AND ($8 IS NULL OR id = $8) \
             AND EXISTS (SELECT 1 FROM memberships m WHERE m.organization_id = services.organization_id AND m.user_id = $9)",
        )
        .bind(self.event_id)
        .bind(self.event.event_type.as_str())
        .bind(self.event.ordering_key())
        .bind(self.dedupe_key)
        .bind(self.event.body(self.event_id, self.now))
        .bind(self.now)
        .bind(provider_pattern(&self.event.provider))
        .bind(self.event.service_id.as_deref())
        .bind(&self.event.user_id);
        let done = on.execute(CacheEffect::Nothing, insert).await.map_err(StoreError::from_write)?;
        Ok(done.rows_affected())
    }

    fn applied(done: &u64) -> bool {
        *done > 0
    }
}

/// An event written beside the change it reports, when some service with a live webhook would
/// hear of it.
impl Note for NewEvent {
    async fn wanted(&self, store: &Store) -> StoreResult<bool> {
        let targets = store.webhooks().targets().await?;
        Ok(match &self.service_id {
            Some(service) => targets.services.contains(service),
            None => targets.providers.contains(&self.provider),
        })
    }

    async fn write_in(&self, tx: &mut Transaction<'_>, now: Timestamp) -> StoreResult<()> {
        let event_id = new_event_id();
        InsertEvent { event: self, event_id: &event_id, dedupe_key: None, now }.run(On::Within(tx)).await?;
        Ok(())
    }

    fn written(&self, store: &Store) {
        store.webhooks().wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_type_reads_back_as_itself() {
        for t in EventType::ALL {
            assert_eq!(EventType::parse(t.as_str()), Some(t));
        }
        assert_eq!(EventType::parse("connection.deleted"), None);
    }

    #[test]
    fn a_provider_with_an_underscore_matches_only_itself() {
        assert_eq!(provider_pattern("my_app"), "% my\\_app %");
    }

    #[test]
    fn the_body_carries_the_id_type_time_and_connection() {
        let event = NewEvent::new(EventType::ConnectionRevoked, "u1", "demo").with("by", "admin");
        let body: serde_json::Value = serde_json::from_str(&event.body("evt_1", 0)).unwrap();
        assert_eq!(body["id"], "evt_1");
        assert_eq!(body["type"], "connection.revoked");
        assert_eq!(body["timestamp"], "1970-01-01T00:00:00Z");
        assert_eq!(body["data"], serde_json::json!({"user_id": "u1", "provider": "demo", "by": "admin"}));
    }
}
