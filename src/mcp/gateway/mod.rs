//! Gateway mode: MCP servers run by others sit behind `/mcp`. The
//! client connects to the broker only; it sees each server's tools under the server's prefix,
//! and each call goes to that server over a connection of the calling user's own, carrying that
//! user's credential (`docs/mcp.md`, "Servers behind the broker", has the table per auth kind).
//!
//! The rooms:
//! - [`registry`]: the registered servers as this instance serves them, each with its cached
//!   tool list; reloaded when the database says they changed.
//! - [`pool`]: the per-(user, server) connections, keyed so they cannot be shared between users.
//! - [`revision`], [`opening`]: which revision a server speaks (2025-11-25 sessions or stateless
//!   2026-07-28), found by the first connection and remembered; connections open that way.
//! - [`transport`]: the HTTP client that puts the connection's *current* credential on each
//!   request.
//! - [`client`]: what a connection hears from its server (list changes, progress, questions,
//!   completions).
//! - [`relay`]: a server's own `elicitation/create`, asked of the user's client in its era;
//!   [`flights`]: a request waiting on this instance while a 2026-07-28 client answers its
//!   server's question by a round trip.
//! - [`pages`]: a server's own `-32042` (pages of its own to open), relayed in the client's era.
//! - [`minted`]: the per-user tokens a `token-exchange` server's calls carry.
//! - `server_link`: a `token-exchange` server's `-32042` that carries the broker's own link.
//! - [`rounds`]: a 2026-07-28 server's `InputRequiredResult`, relayed in the client's era.
//! - [`call`]: one forwarded `tools/call`: credential, connection, the call, a 401's one
//!   refresh and retry, timeouts, audit and metrics — the gates every forwarded request passes.
//! - [`lists`]: each server's prompts, resources and templates, cached like its tools;
//!   [`listed`]: how they are listed; [`uri`]: the URI scheme its resources are listed under;
//!   [`content`]: `prompts/get` and `resources/read` forwarded through the same gates as a
//!   tool call, [`plain_request`] sending each as one request; [`plain`]: why a forwarded
//!   request got no answer. `own_resources`: a server that acts as the user lists each user's
//!   own resources, read over that user's connection when they list (`own_listing`: when
//!   lists leave a server out after it did not answer).
//! - `refresh`: every server's lists read again each `list_refresh` over an open connection,
//!   for the servers that cannot announce a change (stateless ones, closed sessions).
//! - `shared_lists`: the lists as last read, kept in the database for every instance and for
//!   the next start, so no instance lists only a connect tool for a server another has read;
//!   `list_versions`: which stored version each cached list is.
//! - [`subscribed`]: a session's `resources/subscribe` (or a 2026-07-28 listen) to a server's
//!   resource, held on the user's connection, its updates passed on.
//! - [`flight_home`], [`retry_forward`]: a flight's retry that reaches another instance is
//!   passed on to the instance whose call waits for it.
//!
//! An `mcp-oauth` server's authorization server becomes a provider (`mcp-<name>`,
//! [`crate::providers::mcp_oauth`]) while the server is registered, so its users' tokens go
//! through the same connect, consent, refresh and revocation as any provider's.
//!
//! A `token-exchange` server is tied to a registered token-API service: each call carries a
//! token the broker mints for the user and that service's resource ([`minted`]), which the
//! server exchanges at `/token` for the user's provider token.

pub mod call;
pub mod client;
pub mod content;
pub mod flight_home;
pub mod flights;
mod list_versions;
pub mod listed;
pub mod lists;
pub mod minted;
pub mod opening;
mod own_listing;
mod own_resources;
pub mod pages;
pub mod plain;
pub mod plain_request;
pub mod pool;
mod refresh;
pub mod registry;
pub mod relay;
pub mod retry_forward;
pub mod revision;
pub mod rounds;
mod server_link;
mod shared_lists;
pub mod subscribed;
pub mod transport;
pub mod uri;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use rmcp::model::{ErrorData, JsonObject, Tool};

use crate::events::Signal;
use crate::state::AppState;
use crate::store::gateway::ListKind;
use registry::{READ_ANYWAY_EVERY, ServerEntry, Servers, Target, WATCH_EVERY};

/// The servers behind the broker, their tools and this instance's connections to them.
pub struct Gateway {
    app: AppState,
    servers: RwLock<Arc<Servers>>,
    pub(crate) pool: Arc<pool::Pool>,
    /// `token-exchange` servers' per-user tokens.
    pub minted: minted::MintedTokens,
    /// Calls waiting for a 2026-07-28 client's answer to their server's question.
    pub flights: Arc<flights::Flights>,
    /// This instance, as the home its flights' states name for the other instances.
    pub home: flight_home::FlightHome,
    /// rmcp's reqwest client for every upstream connection: no redirects (an MCP endpoint that
    /// redirects is misconfigured or hostile, as for provider endpoints), bounded connect time.
    http: reqwest::Client,
    /// The client that passes a retry on to the instance whose flight waits for it
    /// ([`retry_forward`]): no redirects, no proxy from the environment (the instances reach
    /// each other directly), a short connect wait.
    pub(crate) forwarding: reqwest::Client,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gateway({} servers)", self.servers().iter().count())
    }
}

impl Gateway {
    /// Reads the registered servers and starts watching for changes and sweeping idle
    /// connections, until the app shuts down.
    pub async fn start(app: AppState, sharing: pool::Sharing) -> anyhow::Result<Arc<Self>> {
        let settings = &app.core.config.gateway;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(5))
            .build()?;
        let forwarding = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(retry_forward::CONNECT_WAIT)
            // The holding instance answers within its call timeout (a further question is an
            // answer too); past it, the instance is stuck and the client is let go.
            .timeout(settings.call_timeout + retry_forward::CONNECT_WAIT + Duration::from_secs(30))
            .build()?;
        let gateway = Arc::new(Self {
            forwarding,
            pool: Arc::new(pool::Pool::new(settings.max_connections, settings.idle, sharing)),
            servers: RwLock::default(),
            minted: minted::MintedTokens::default(),
            flights: flights::Flights::new(settings.question_wait, flights::MAX_FLIGHTS),
            home: flight_home::FlightHome::default(),
            http,
            app: app.clone(),
        });
        gateway.reload().await?;
        gateway.pool.start_sweeping(app.shutdown.clone());
        Self::watch(&gateway);
        Self::hear_stored_lists(&gateway);
        Self::start_refreshing(&gateway);
        Ok(gateway)
    }

    /// How many connections to servers behind the broker this instance holds open.
    pub fn open_connections(&self) -> usize {
        self.pool.len()
    }

    pub(crate) fn servers(&self) -> Arc<Servers> {
        self.servers.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// What `tools/list` adds after the broker's own tools: each server's (or its connect
    /// tool), leaving out any name the broker's own tools already use.
    pub fn tools(&self, builtin: &[Tool]) -> Vec<Tool> {
        let servers = self.servers();
        let mut listed = Vec::new();
        for entry in servers.iter() {
            for tool in entry.listed() {
                if builtin.iter().any(|b| b.name == tool.name) {
                    tracing::warn!(server = %entry.row.name, "a server's tool has the name of one of the broker's; left out");
                    continue;
                }
                listed.push(tool);
            }
        }
        listed
    }

    /// The server and tool behind a listed name.
    pub fn resolve(&self, name: &str) -> Option<(Arc<ServerEntry>, Target)> {
        self.servers().resolve(name)
    }

    /// MCP server/tools: a server's tool is called only with arguments that fit the schema the
    /// client was shown (`-32602` naming the field otherwise), as the broker's own tools are.
    pub fn check(&self, entry: &ServerEntry, name: &str, arguments: Option<&JsonObject>) -> Result<(), ErrorData> {
        match entry.tools() {
            Some(tools) => tools.catalogue.check(name, arguments),
            None => Ok(()),
        }
    }

    /// Reads the registered servers and applies the difference: new ones get an entry (and
    /// their tools, if no user's credential is needed to read them), removed ones lose their
    /// connections, changed ones get a new entry (and provider) with the lists read so far and
    /// new connections; listening clients hear of a changed tool list.
    pub async fn reload(self: &Arc<Self>) -> anyhow::Result<()> {
        let rows = self.app.core.store.gateway_servers().list().await?;
        let current = self.servers();
        let mut entries = Vec::new();
        let mut added = Vec::new();
        for row in rows {
            let earlier = current.by_id(&row.id);
            match earlier {
                // Compared whole, not by `updated_at` (seconds: two changes may share one).
                Some(entry) if entry.row == row => entries.push(entry.clone()),
                _ => {
                    if let Some(entry) = ServerEntry::load(row, &self.app.core.sealer) {
                        let entry = Arc::new(entry);
                        // Changed in place (its authorization server, `servers rediscover`; its
                        // secret, `keys rewrap`): the same server, whose lists stand; its
                        // connections are opened again.
                        match earlier {
                            Some(earlier) => entry.inherit(earlier),
                            None => added.push(entry.clone()),
                        }
                        entries.push(entry);
                    }
                }
            }
        }
        // Removed, or replaced by a changed row: their connections end.
        let removed: Vec<Arc<ServerEntry>> =
            current.iter().filter(|old| !entries.iter().any(|e| Arc::ptr_eq(e, old))).cloned().collect();
        if added.is_empty() && removed.is_empty() {
            return Ok(());
        }
        // `mcp-oauth` servers' authorization servers, as providers (before the servers are
        // served, so a user's first call finds its provider).
        self.app.core.providers.set_server_providers(entries.iter().filter_map(|e| e.provider()).collect());
        // What any instance read of the new ones, listed from the first request on.
        let stored = self.take_stored_lists(&added).await;
        let changed: Vec<bool> = removed.iter().map(|old| entries.iter().any(|e| e.row.id == old.row.id)).collect();
        *self.servers.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(Servers::new(entries));
        for (entry, changed) in removed.iter().zip(changed) {
            let closed = self.pool.close_server(&entry.row.id);
            if changed {
                tracing::info!(server = %entry.row.name, connections = closed, "a server behind the broker was changed; its connections open again");
            } else {
                tracing::info!(server = %entry.row.name, connections = closed, "a server behind the broker was removed");
            }
        }
        for entry in added {
            tracing::info!(server = %entry.row.name, auth = entry.row.auth.kind(), "a server behind the broker was added");
            if !entry.row.auth.per_user() {
                let gateway = self.clone();
                tokio::spawn(async move { gateway.fetch_shared_tools(&entry).await });
            }
        }
        self.tools_changed();
        self.tell_clients(shared_lists::Changed { tools: false, ..stored });
        Ok(())
    }

    /// A server that needs no user's credential: its tools are read once over a connection of
    /// no user's, closed after. A failure leaves its connect tool listed.
    async fn fetch_shared_tools(self: &Arc<Self>, entry: &Arc<ServerEntry>) {
        let cell = Arc::new(transport::CredentialCell::default());
        cell.set(call::shared_credential(entry));
        let opened =
            tokio::time::timeout(self.app.core.config.gateway.call_timeout, self.open(entry, cell, None)).await;
        match opened {
            Ok(Ok(connection)) => {
                self.fill_tools(entry, connection.service.peer()).await;
                self.fill_lists(entry, connection.service.peer()).await;
                connection.close();
            }
            Ok(Err(error)) => {
                tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "could not read a server's tools")
            }
            Err(_) => tracing::warn!(server = %entry.row.name, "a server did not answer in time to list its tools"),
        }
    }

    /// Reads the server's tools over `peer` into its entry; tells listening clients if they
    /// changed.
    pub(crate) async fn fill_tools(&self, entry: &ServerEntry, peer: &rmcp::Peer<rmcp::RoleClient>) -> bool {
        match tokio::time::timeout(self.app.core.config.gateway.call_timeout, peer.list_all_tools()).await {
            Ok(Ok(tools)) => {
                let answer = serde_json::to_string(&tools);
                let changed = entry.set_tools(tools);
                entry.read_done();
                if changed {
                    self.tools_changed();
                }
                if changed || entry.shared.not_stored(ListKind::Tools) {
                    self.share_list(entry, ListKind::Tools, answer).await;
                }
                true
            }
            Ok(Err(error)) => {
                tracing::warn!(server = %entry.row.name, %error, "a server's tools/list failed");
                false
            }
            Err(_) => {
                tracing::warn!(server = %entry.row.name, "a server's tools/list did not answer in time");
                false
            }
        }
    }

    /// `notifications/tools/list_changed` to every session and listening stream of this
    /// instance (each instance keeps its own lists, and hears of another's through
    /// `shared_lists`).
    fn tools_changed(&self) {
        self.app.core.events.signal(Signal::ToolsChanged);
    }

    /// Reloads when everyone's generation moves (or, while it is not trusted, now and then).
    fn watch(gateway: &Arc<Self>) {
        let every = crate::every::Every::new(gateway, WATCH_EVERY, gateway.app.shutdown.clone());
        let mut seen = gateway.app.core.store.cache_shared_generation();
        tokio::spawn(async move {
            let mut last_read = tokio::time::Instant::now();
            while let Some(gateway) = every.tick().await {
                let now_seen = gateway.app.core.store.cache_shared_generation();
                let due = match now_seen {
                    Some(_) => now_seen != seen,
                    None => last_read.elapsed() >= READ_ANYWAY_EVERY,
                };
                if !due {
                    continue;
                }
                match gateway.reload().await {
                    Ok(()) => {
                        seen = now_seen;
                        last_read = tokio::time::Instant::now();
                    }
                    Err(error) => {
                        tracing::warn!(error = %crate::error_chain::Chain(error.as_ref()), "could not read the servers behind the broker")
                    }
                }
            }
        });
    }
}
