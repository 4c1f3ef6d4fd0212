//! The user's approvals of (client, server) pairs (migration 0030): a client may call a server
//! behind the broker only once the user approved that pair on the consent pages. Read on every
//! forwarded call, so a (user, client)'s approvals are kept under the user's generation
//! ([`crate::store::machinery::generations`]) like the grants ([`crate::store::grants::cache`]): an
//! approval or a withdrawal of this process moves it at once, another process's through the
//! triggers on `gateway_consents`.

use std::sync::Arc;

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::generation_cache::GenerationCache;
use crate::store::machinery::kept::Kept;
use crate::store::machinery::store::Store;
use crate::store::machinery::write::{On, Write, Written};

/// The handle on the users' approvals of (client, server) pairs: `store.gateway_consents()`.
#[derive(Debug, Clone, Copy)]
pub struct GatewayConsents<'s> {
    pub(in crate::store) store: &'s Store,
}

/// At most this many (user, client) reads are kept; a full cache starts over.
pub(in crate::store) const CAPACITY: usize = 50_000;

/// The approved servers of each (user, client key), by server id.
struct ApprovalCache(GenerationCache<(String, String), Arc<Vec<String>>>);

impl Default for ApprovalCache {
    fn default() -> Self {
        Self(GenerationCache::new(CAPACITY))
    }
}

impl Kept for ApprovalCache {}

/// One approval, as the connections and admin pages list it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct GatewayConsentRow {
    pub user_id: String,
    pub client_key: String,
    pub server_id: String,
    /// The server's registered name (from `gateway_servers`).
    pub server_name: String,
    pub client_name: Option<String>,
    pub created_at: Timestamp,
}

/// An approval to record with an authorization's completion.
#[derive(Debug, Clone, Copy)]
pub struct NewGatewayConsent<'a> {
    pub user_id: &'a str,
    pub client_key: &'a str,
    pub server_id: &'a str,
    pub client_name: Option<&'a str>,
}

/// [`GatewayConsents::record`]: false when the server is gone.
///
/// Recording an approval again changes nothing. INSERT … SELECT from `gateway_servers`, so
/// nothing is written for a server removed meanwhile (the WHERE clause also keeps SQLite from
/// reading `ON CONFLICT` as part of the SELECT).
pub struct RecordGatewayConsent<'a> {
    new: NewGatewayConsent<'a>,
    now: Timestamp,
}

impl Write for RecordGatewayConsent<'_> {
    type Done = bool;

    async fn run(&self, on: On<'_, '_>) -> StoreResult<bool> {
        let upsert = sqlx::query(
            "INSERT INTO gateway_consents (user_id, client_key, server_id, client_name, created_at) \
             SELECT $1, $2, id, $4, $5 FROM gateway_servers WHERE id = $3 \
             ON CONFLICT (user_id, client_key, server_id) DO UPDATE SET client_name = excluded.client_name",
        )
        .bind(self.new.user_id)
        .bind(self.new.client_key)
        .bind(self.new.server_id)
        .bind(self.new.client_name)
        .bind(self.now);
        Ok(on.execute(CacheEffect::User(self.new.user_id), upsert).await?.rows_affected() == 1)
    }

    fn applied(done: &bool) -> bool {
        *done
    }
}

const COLUMNS: &str = "c.user_id, c.client_key, c.server_id, s.name AS server_name, c.client_name, c.created_at";

impl<'s> GatewayConsents<'s> {
    /// Whether the user approved `client_key` for server `server_id`: from the kept read of
    /// this (user, client) while nothing was written about the user since.
    pub async fn approved(self, user_id: &str, client_key: &str, server_id: &str) -> StoreResult<bool> {
        let key = (user_id.to_owned(), client_key.to_owned());
        let cache = self.store.kept::<ApprovalCache>();
        if let Some(generation) = self.store.cache_generation(user_id)
            && let Some(servers) = cache.0.get(&key, |_| Some(generation))
        {
            return Ok(servers.iter().any(|s| s == server_id));
        }
        let before = self.store.cache_tick();
        let servers: Vec<(String,)> =
            sqlx::query_as("SELECT server_id FROM gateway_consents WHERE user_id = $1 AND client_key = $2")
                .bind(user_id)
                .bind(client_key)
                .fetch_all_in(self.store.read())
                .await?;
        let servers: Arc<Vec<String>> = Arc::new(servers.into_iter().map(|(s,)| s).collect());
        let approved = servers.iter().any(|s| s == server_id);
        if let Some(before) = before {
            cache.0.insert(before, self.store.cache_generation(user_id), key, servers);
        }
        Ok(approved)
    }

    /// Records an approval (with an authorization's completion, or outside any: tests, tools);
    /// false if the server is gone.
    pub fn record(self, new: &NewGatewayConsent<'s>, now: Timestamp) -> Written<'s, RecordGatewayConsent<'s>> {
        Written::new(self.store, RecordGatewayConsent { new: *new, now })
    }

    /// The user's approvals, by server name then client.
    pub async fn for_user(self, user_id: &str) -> StoreResult<Vec<GatewayConsentRow>> {
        Ok(sqlx::query_as::<_, GatewayConsentRow>(&format!(
            "SELECT {COLUMNS} FROM gateway_consents c JOIN gateway_servers s ON s.id = c.server_id \
             WHERE c.user_id = $1 ORDER BY s.name, c.client_key"
        ))
        .bind(user_id)
        .fetch_all_in(self.store.read())
        .await?)
    }

    /// The newest `limit` approvals of server `server_id` (its admin page), newest first; read
    /// from the end of the (server, time) index (migration 0035), at any number of approvals.
    pub async fn for_server(self, server_id: &str, limit: i64) -> StoreResult<Vec<GatewayConsentRow>> {
        Ok(sqlx::query_as::<_, GatewayConsentRow>(&format!(
            "SELECT {COLUMNS} FROM gateway_consents c JOIN gateway_servers s ON s.id = c.server_id \
             WHERE c.server_id = $1 ORDER BY c.created_at DESC LIMIT $2"
        ))
        .bind(server_id)
        .bind(limit)
        .fetch_all_in(self.store.read())
        .await?)
    }

    /// Withdraws one approval of this user; false if there was none.
    pub async fn withdraw(self, user_id: &str, client_key: &str, server_id: &str) -> StoreResult<bool> {
        let done =
            sqlx::query("DELETE FROM gateway_consents WHERE user_id = $1 AND client_key = $2 AND server_id = $3")
                .bind(user_id)
                .bind(client_key)
                .bind(server_id)
                .execute(self.store.write(CacheEffect::User(user_id)))
                .await?;
        Ok(done.rows_affected() == 1)
    }
}

impl GatewayConsents<'_> {
    /// Withdraws every approval of this user for one client (the client was signed out);
    /// returns how many there were.
    pub async fn withdraw_client(self, user_id: &str, client_key: &str) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM gateway_consents WHERE user_id = $1 AND client_key = $2")
            .bind(user_id)
            .bind(client_key)
            .execute(self.store.write(CacheEffect::User(user_id)))
            .await?;
        Ok(done.rows_affected())
    }
}
