//! The per-user upstream connections of one instance: one rmcp client connection per
//! (user, server), never shared between users.
//!
//! The key is [`UpstreamKey`], which can only be made from a verified user *and* a
//! registered server ([`UpstreamKey::new`]): there is no way to ask for "the connection to
//! server S" without saying whose. A connection carries its user's credential
//! (`super::credential`), so sharing one between users would send one user's calls with another
//! user's token, a bug other gateways have had.
//!
//! A connection is opened on its user's first call, kept while used, and closed after
//! `gateway_idle` without a call, when its server is removed, or when the instance holds
//! `gateway_max_connections` and needs room (the one idle longest goes first). A connection
//! with a call on it — running, or parked waiting for the user's answer to the server's
//! question (`crate::mcp::gateway::forward::flights`, for up to `question_wait`, which may be longer than `idle`) —
//! is never idle: neither the sweep nor the bound closes it under its call. A connection
//! that broke is forgotten and opened again by the next call. Two calls of the same user that
//! find no connection wait for one opening, not two.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::service::RunningService;
use tokio::time::Instant;

use super::client::UpstreamHandler;
use super::credential::CredentialCell;
use crate::identity::AuthenticatedUser;
use crate::mcp::gateway::catalogue::registry::ServerEntry;

/// Whose connection to which server. Built only by [`UpstreamKey::new`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpstreamKey {
    user_id: String,
    server_id: String,
}

impl UpstreamKey {
    /// The connection of `user` to `server`.
    pub fn new(user: &AuthenticatedUser, server: &ServerEntry) -> Self {
        Self { user_id: user.user_id.clone(), server_id: server.row.id.clone() }
    }

    /// One key for every user of `server`: the shared connection the cross-user test must catch.
    /// Only [`Sharing::EveryoneForTests`] makes it.
    fn everyones(server: &ServerEntry) -> Self {
        Self { user_id: String::new(), server_id: server.row.id.clone() }
    }

    pub fn server_id(&self) -> &str {
        &self.server_id
    }
}

/// Whose calls a connection carries. The product only ever builds [`Sharing::PerUser`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sharing {
    #[default]
    PerUser,
    /// Every user's calls to a server over one connection, with whichever credential was set
    /// last: the bug the cross-user test exists to catch. Reachable only from code that builds
    /// the app (`crate::app::AppBuilder::shared_gateway_connections_for_tests`), never from
    /// configuration, so the test can show its assertion failing.
    EveryoneForTests,
}

/// One open connection and the credential cell its transport reads.
pub struct Upstream {
    pub service: RunningService<rmcp::RoleClient, UpstreamHandler>,
    pub credential: Arc<CredentialCell>,
    last_used: Mutex<Instant>,
    /// Set by [`Upstream::close`]: rmcp ends the session in the background, and until it has,
    /// the connection must not be handed out again.
    closing: AtomicBool,
}

impl Upstream {
    pub fn new(service: RunningService<rmcp::RoleClient, UpstreamHandler>, credential: Arc<CredentialCell>) -> Self {
        crate::telemetry::gateway_connection_opened();
        Self { service, credential, last_used: Mutex::new(Instant::now()), closing: AtomicBool::new(false) }
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    fn last_used(&self) -> Instant {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn is_usable(&self) -> bool {
        !self.is_closing() && !self.service.is_closed() && !self.service.peer().is_transport_closed()
    }

    /// Whether a call holds it. The pool's slot holds one reference; every call (and every
    /// parked flight) holds another from `get_or_open` until it ends.
    fn has_calls(self: &Arc<Self>) -> bool {
        Arc::strong_count(self) > 1
    }

    /// Ends the connection (rmcp closes its session in the background).
    pub fn close(&self) {
        self.closing.store(true, Ordering::Relaxed);
        self.service.cancellation_token().cancel();
    }

    fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        crate::telemetry::gateway_connection_closed();
    }
}

#[derive(Default)]
struct Slot {
    connection: tokio::sync::Mutex<Option<Arc<Upstream>>>,
}

/// The connections of this instance.
pub struct Pool {
    slots: Mutex<HashMap<UpstreamKey, Arc<Slot>>>,
    max: usize,
    idle: Duration,
    sharing: Sharing,
}

impl Pool {
    pub fn new(max: usize, idle: Duration, sharing: Sharing) -> Self {
        Self { slots: Mutex::default(), max: max.max(1), idle, sharing }
    }

    /// The key of `user`'s connection to `server`.
    pub fn key(&self, user: &AuthenticatedUser, server: &ServerEntry) -> UpstreamKey {
        match self.sharing {
            Sharing::PerUser => UpstreamKey::new(user, server),
            Sharing::EveryoneForTests => UpstreamKey::everyones(server),
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<UpstreamKey, Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The user's open connection to the server, or a new one from `open`.
    pub async fn get_or_open<E, F, Fut>(&self, key: &UpstreamKey, open: F) -> Result<Arc<Upstream>, E>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Upstream, E>>,
    {
        let slot = self.slots().entry(key.clone()).or_default().clone();
        let mut held = slot.connection.lock().await;
        if let Some(connection) = held.as_ref().filter(|c| c.is_usable()) {
            connection.touch();
            return Ok(connection.clone());
        }
        if let Some(broken) = held.take() {
            broken.close();
        }
        self.make_room(key);
        let connection = Arc::new(open().await?);
        *held = Some(connection.clone());
        Ok(connection)
    }

    /// The key's usable connection, if one is open.
    pub async fn open_connection(&self, key: &UpstreamKey) -> Option<Arc<Upstream>> {
        let slot = self.slots().get(key).cloned()?;
        let held = slot.connection.lock().await;
        held.as_ref().filter(|c| c.is_usable()).cloned()
    }

    /// Forgets `connection` (it broke) if it is still the key's, so the next call opens another.
    pub fn forget(&self, key: &UpstreamKey, connection: &Arc<Upstream>) {
        connection.close();
        let slot = self.slots().get(key).cloned();
        if let Some(slot) = slot
            && let Ok(mut held) = slot.connection.try_lock()
            && held.as_ref().is_some_and(|c| Arc::ptr_eq(c, connection))
        {
            *held = None;
        }
    }

    /// Some user's usable connection to `server_id`, as its peer, without marking it used: for
    /// reading the server's lists again ([`crate::mcp::gateway::catalogue::reread`]), which must keep no connection
    /// open that would otherwise close as idle.
    pub fn any_open_peer(&self, server_id: &str) -> Option<rmcp::Peer<rmcp::RoleClient>> {
        let slots: Vec<Arc<Slot>> =
            self.slots().iter().filter(|(key, _)| key.server_id == server_id).map(|(_, slot)| slot.clone()).collect();
        slots.iter().find_map(|slot| {
            let held = slot.connection.try_lock().ok()?;
            held.as_ref().filter(|c| c.is_usable()).map(|c| c.service.peer().clone())
        })
    }

    /// Closes every connection to `server_id` (the server was removed).
    pub fn close_server(&self, server_id: &str) -> usize {
        let removed: Vec<Arc<Slot>> = {
            let mut slots = self.slots();
            let keys: Vec<UpstreamKey> = slots.keys().filter(|k| k.server_id == server_id).cloned().collect();
            keys.iter().filter_map(|k| slots.remove(k)).collect()
        };
        let count = removed.len();
        for slot in removed {
            // A call opening or using it holds the slot; it finishes with the connection it has.
            tokio::spawn(async move {
                if let Some(connection) = slot.connection.lock().await.take() {
                    connection.close();
                }
            });
        }
        count
    }

    /// How many connections are open (slots being opened or used are counted as open).
    pub fn len(&self) -> usize {
        self.slots().values().filter(|slot| slot.connection.try_lock().map_or(true, |held| held.is_some())).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Closes connections unused for longer than the idle setting. One with a call on it counts
    /// as used now, so its idle time runs from the sweep after its last call ended.
    pub fn sweep(&self, now: Instant) {
        let mut slots = self.slots();
        slots.retain(|_, slot| {
            let Ok(mut held) = slot.connection.try_lock() else { return true };
            match held.as_ref() {
                Some(c) if c.is_usable() && c.has_calls() => {
                    c.touch();
                    true
                }
                Some(c) if c.is_usable() && now.saturating_duration_since(c.last_used()) < self.idle => true,
                Some(_) => {
                    if let Some(connection) = held.take() {
                        connection.close();
                    }
                    false
                }
                None => false,
            }
        });
    }

    /// At the bound, closes the connection idle longest (never `except`'s, being opened, nor one
    /// with a call on it: another user's running call is not cut to make room, so while every
    /// connection is busy the instance holds a few more than the bound).
    fn make_room(&self, except: &UpstreamKey) {
        let slots = self.slots();
        let mut open = 0usize;
        let mut oldest: Option<(Instant, UpstreamKey)> = None;
        for (key, slot) in slots.iter() {
            let Ok(held) = slot.connection.try_lock() else {
                open += 1;
                continue;
            };
            let Some(connection) = held.as_ref() else { continue };
            open += 1;
            let used = connection.last_used();
            if key != except && !connection.has_calls() && oldest.as_ref().is_none_or(|(at, _)| used < *at) {
                oldest = Some((used, key.clone()));
            }
        }
        drop(slots);
        if open < self.max {
            return;
        }
        if let Some((_, key)) = oldest {
            let mut slots = self.slots();
            // Taken only if still idle: a call may have picked it up since it was chosen.
            if let Some(slot) = slots.get(&key).cloned()
                && let Ok(mut held) = slot.connection.try_lock()
                && held.as_ref().is_none_or(|c| !c.has_calls())
            {
                slots.remove(&key);
                if let Some(connection) = held.take() {
                    connection.close();
                }
            }
        }
    }

    /// Runs [`Pool::sweep`] every half idle period (at least every second) until `stop`.
    pub fn start_sweeping(self: &Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let period = (self.idle / 2).clamp(Duration::from_millis(100), Duration::from_secs(30));
        let every = crate::every::Every::new(self, period, stop);
        tokio::spawn(async move {
            while let Some(pool) = every.tick().await {
                pool.sweep(Instant::now());
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that answers `initialize` and nothing more.
    struct Quiet;
    impl rmcp::ServerHandler for Quiet {}

    /// A real rmcp client connection over an in-memory pipe.
    async fn connection() -> Upstream {
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            if let Ok(server) = rmcp::serve_server(Quiet, server_io).await {
                let _ = server.waiting().await;
            }
        });
        let service = rmcp::serve_client(UpstreamHandler::detached("s"), client_io).await.expect("connects");
        Upstream::new(service, Arc::default())
    }

    fn key(user: &str) -> UpstreamKey {
        UpstreamKey { user_id: user.to_owned(), server_id: "s".to_owned() }
    }

    async fn open(pool: &Pool, user: &str) -> Arc<Upstream> {
        pool.get_or_open(&key(user), || async { Ok::<_, std::convert::Infallible>(connection().await) }).await.unwrap()
    }

    /// Whether the pool still holds it open. A `Weak`, so the test itself is not a call on it.
    fn open_in_pool(connection: &std::sync::Weak<Upstream>) -> bool {
        connection.upgrade().is_some_and(|c| !c.is_closing())
    }

    #[tokio::test]
    async fn the_sweep_leaves_a_connection_with_a_call_on_it_and_closes_it_once_idle() {
        let idle = Duration::from_secs(1);
        let pool = Pool::new(10, idle, Sharing::PerUser);
        let call = open(&pool, "alice").await;
        let connection = Arc::downgrade(&call);
        let long_after = || Instant::now() + idle * 10;

        // A call (or a parked question) has held it far longer than `idle`: still open.
        pool.sweep(long_after());
        assert!(!call.is_closing());
        assert_eq!(pool.len(), 1);

        // The call ends: idle time runs from then, and the sweep after that closes it.
        drop(call);
        pool.sweep(Instant::now());
        assert!(open_in_pool(&connection), "idle for less than `idle`");
        pool.sweep(long_after());
        assert!(!open_in_pool(&connection));
        assert_eq!(pool.len(), 0);
    }

    #[tokio::test]
    async fn reading_a_servers_lists_over_an_idle_connection_does_not_keep_it_open() {
        let idle = Duration::from_secs(1);
        let pool = Pool::new(10, idle, Sharing::PerUser);
        let connection = Arc::downgrade(&open(&pool, "alice").await);
        assert!(pool.any_open_peer("another server").is_none());

        // The list refresh holds the peer while the sweep runs: the connection still closes.
        let peer = pool.any_open_peer("s").expect("alice's connection to s");
        pool.sweep(Instant::now() + idle * 10);
        assert!(!open_in_pool(&connection));
        assert!(pool.any_open_peer("s").is_none(), "a closed connection is never offered");
        drop(peer);
    }

    #[tokio::test]
    async fn room_is_made_from_an_idle_connection_never_from_one_with_a_call() {
        let pool = Pool::new(1, Duration::from_secs(60), Sharing::PerUser);
        let alices_call = open(&pool, "alice").await;

        // At the bound, but alice's call is running: bob's connection opens beside it.
        let bobs_call = open(&pool, "bob").await;
        assert!(!alices_call.is_closing());
        assert_eq!(pool.len(), 2);

        // Once alice's call ended (bob's still running), carol's opening closes alice's.
        let alices = Arc::downgrade(&alices_call);
        drop(alices_call);
        let carols_call = open(&pool, "carol").await;
        assert!(!open_in_pool(&alices));
        assert!(!bobs_call.is_closing() && !carols_call.is_closing());
        assert_eq!(pool.len(), 2);
    }
}
