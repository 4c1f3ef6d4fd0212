//! Builds the application from a [`Config`] and runs it.
//!
//! `App::build` connects and migrates the database, loads (or creates) the encryption and
//! signing keys, and assembles the router from each module's `router()`. `App::run` serves a
//! listener the caller bound, so tests bind port 0 and never sleep.

use std::future::{Future, IntoFuture};
use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use axum::serve::ListenerExt;
use tokio::net::TcpListener;

use crate::broker::Core;
use crate::clock::SharedClock;
use crate::config::Config;
use crate::events::Events;
use crate::identity::jwt::TokenKeys;
use crate::mcp::extension::{Extension, Extensions};
use crate::mcp::prompts::PromptCatalogue;
use crate::mcp::state::McpState;
use crate::providers::registry::Providers;
use crate::startup::{Opening, load_sealer, open_store};
use crate::state::AppState;

pub struct App {
    state: AppState,
    router: Router,
    parked: Arc<crate::mcp::transport::session_transport::ParkedCount>,
    gateway: Arc<crate::mcp::gateway::state::Gateway>,
}

/// Assembles an [`App`]: configuration, clock, and optional extensions.
pub struct AppBuilder {
    config: Config,
    clock: SharedClock,
    extensions: Vec<Arc<dyn Extension>>,
    fixed_identity: Option<String>,
    gateway_sharing: crate::mcp::gateway::upstream::pool::Sharing,
}

impl AppBuilder {
    /// Adds tools, prompts and resources served next to the broker's own.
    pub fn extension(mut self, extension: impl Extension) -> Self {
        self.extensions.push(Arc::new(extension));
        self
    }

    /// For test harnesses that cannot send a bearer token (the MCP conformance suite): /mcp
    /// requests without an `Authorization` header act as local user `username` (created if
    /// missing). A request that does carry a token is still verified normally. Never reachable
    /// from configuration: only code that builds the app can ask for it.
    pub fn fixed_identity_for_tests(mut self, username: &str) -> Self {
        self.fixed_identity = Some(username.to_owned());
        self
    }

    /// For the one test that shows the gateway's cross-user test failing when every user's
    /// calls to a server share one connection. Never reachable from configuration.
    pub fn shared_gateway_connections_for_tests(mut self) -> Self {
        self.gateway_sharing = crate::mcp::gateway::upstream::pool::Sharing::EveryoneForTests;
        self
    }

    pub async fn build(self) -> anyhow::Result<App> {
        crate::telemetry::install();
        let mut state = build_state(self.config, self.clock).await?;
        // What other processes write reaches this server's caches (see
        // `store::generations`); started before the first request is served.
        state.core.store.watch_other_writers(state.shutdown.clone()).await;
        // The token API's audit events go to the database in batches; flushed as `run` ends.
        state.core.store.audit_queue().start_writer();
        if state.core.store.backend() == crate::store::Backend::Postgres {
            let (store, clock, shutdown) = (state.core.store.clone(), state.core.clock.clone(), state.shutdown.clone());
            state
                .core
                .events
                .listen_to_other_instances(state.core.config.signal_listener_url(), store, clock, shutdown)
                .await?;
        }
        if let Some(oidc) = &state.identity.oidc {
            oidc.start(state.core.clock.clone(), state.shutdown.clone()).await;
        }
        if let Some(name) = self.fixed_identity {
            ensure_local_user(&state, &name).await?;
            state.set_fixed_identity(name);
        }
        settle_abandoned_exchanges(&state);
        // Events for services' webhooks, delivered from the outbox.
        crate::events::webhooks::start(
            crate::events::webhooks::Deliveries::new(
                state.core.store.clone(),
                state.core.sealer.clone(),
                state.core.clock.clone(),
                state.core.config.webhooks.clone(),
            ),
            state.shutdown.clone(),
        );
        crate::keyring::reload_periodically(&state);
        let extensions = Extensions(Arc::new(self.extensions));
        let prompts = Arc::new(PromptCatalogue::new(&state.core.config, extensions.clone(), state.core.events.clone()));
        prompts.start_watching(state.shutdown.clone());
        let tools = Arc::new(McpState::tool_catalogue(&state, &extensions));
        let gateway = crate::mcp::gateway::state::Gateway::start(state.clone(), self.gateway_sharing).await?;
        let mcp = McpState {
            app: state.clone(),
            sessions: Arc::new(crate::mcp::session::SessionTable::new(state.core.clock.clone())),
            parked: Default::default(),
            extensions,
            prompts,
            tools,
            gateway: gateway.clone(),
        };
        let parked = mcp.parked.clone();
        let router = router(state.clone(), mcp);
        Ok(App { state, router, parked, gateway })
    }
}

/// Every minute (and once now): an exchange abandoned by a process that stopped mid-way is
/// marked failed, so the row does not wait for an operator and whoever waits on it is told.
fn settle_abandoned_exchanges(state: &AppState) {
    let (core, shutdown) = (state.core.clone(), state.shutdown.clone());
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(60));
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = every.tick() => {}
            }
            match crate::broker::flow::settle_interrupted_exchanges(&core).await {
                Ok(0) => {}
                Ok(settled) => tracing::info!(settled, "marked abandoned code exchanges failed"),
                Err(error) => tracing::warn!(%error, "could not settle abandoned code exchanges"),
            }
        }
    });
}

async fn ensure_local_user(state: &AppState, name: &str) -> anyhow::Result<()> {
    if state.core.store.users().by_username(name).await?.is_none() {
        let password = crate::identity::password::generate_password();
        let hash = crate::identity::password::hash_password(&password)?;
        state.core.store.users().create_local(&state.core.config.issuer(), name, &hash, state.core.now()).await?;
    }
    Ok(())
}

impl App {
    pub fn builder(config: Config, clock: SharedClock) -> AppBuilder {
        AppBuilder { config, clock, extensions: Vec::new(), fixed_identity: None, gateway_sharing: Default::default() }
    }

    /// The broker with no extensions.
    pub async fn build(config: Config, clock: SharedClock) -> anyhow::Result<Self> {
        Self::builder(config, clock).build().await
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// How many of this app's MCP sessions are parked now (tests wait for parking on it).
    pub fn parked_mcp_sessions(&self) -> Arc<crate::mcp::transport::session_transport::ParkedCount> {
        self.parked.clone()
    }

    /// The servers behind the broker as this app serves them (tests read what it minted).
    pub fn gateway(&self) -> Arc<crate::mcp::gateway::state::Gateway> {
        self.gateway.clone()
    }

    /// Serves until `shutdown` resolves, then stops gracefully: no new connections; listeners
    /// on standalone SSE streams get a `retry:` hint and their stream ends (they reconnect,
    /// to another instance); requests already running (tool calls, token API calls, a refresh
    /// at a provider) may finish for up to `shutdown_grace`; whatever is still open then is
    /// ended. Returns once every connection is closed.
    pub async fn run(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        // Logged here, under this module's target, with the address really bound (a port of 0
        // gets its number).
        let bound_address = listener.local_addr().unwrap_or(self.state.core.config.listen);
        let bound = bound_address.to_string();
        // Other instances pass on a 2026-07-28 client's answer to a question waiting here.
        let config = &self.state.core.config;
        let homed =
            self.gateway.home.set_address(config.gateway.instance_url.as_ref(), bound_address, &config.public_url);
        if !homed && config.database_url.starts_with("postgres") {
            tracing::info!(
                "no [gateway] instance_url, listening on {bound}: with several instances, a 2026-07-28 client's \
                 answer to a server's question that reaches another one is told to send its request again"
            );
        }
        tracing::info!(
            version = env!("CARGO_PKG_VERSION"),
            mcp = %self.state.core.config.mcp_url(),
            database = %crate::config::redact_database_url(&self.state.core.config.database_url),
            "oauth-broker listening on {bound}"
        );
        // Without TCP_NODELAY every small SSE write waits for the peer's delayed ACK (~40 ms).
        let listener = listener.tap_io(|tcp| {
            if let Err(error) = tcp.set_nodelay(true) {
                tracing::warn!(%error, "could not set TCP_NODELAY");
            }
        });
        let grace = self.state.core.config.shutdown_grace;
        let (draining, cancel) = (self.state.draining.clone(), self.state.shutdown.clone());
        // /metrics on its own address, served until the process stops.
        if let Some(address) = self.state.core.config.ops.metrics_listen {
            let metrics = TcpListener::bind(address).await?;
            tracing::info!(%address, "serving /metrics");
            let stop = cancel.clone();
            tokio::spawn(async move {
                let serve = axum::serve(metrics, crate::telemetry::metrics_listener_router())
                    .with_graceful_shutdown(async move { stop.cancelled().await });
                if let Err(error) = serve.await {
                    tracing::error!(%error, "the metrics listener stopped");
                }
            });
        }
        let core = self.state.core.clone();
        // When the grace period ends, counted from the stop signal.
        let grace_ends = Arc::new(std::sync::OnceLock::new());
        let serve = axum::serve(listener, self.router.into_make_service_with_connect_info::<std::net::SocketAddr>())
            .with_graceful_shutdown({
                let (draining, grace_ends) = (draining.clone(), grace_ends.clone());
                async move {
                    shutdown.await;
                    let _ = grace_ends.set(tokio::time::Instant::now() + grace);
                    tracing::info!(?grace, "stopping: no new connections; requests already running may finish");
                    draining.cancel();
                }
            })
            .into_future();
        tokio::pin!(serve);
        let result = tokio::select! {
            result = &mut serve => result,
            _ = async { draining.cancelled().await; tokio::time::sleep(grace).await } => {
                tracing::warn!(?grace, "grace period over: ending the requests still open");
                // Ends every stream (and each session), so their connections close now.
                cancel.cancel();
                match tokio::time::timeout(FINAL_CLOSE, &mut serve).await {
                    Ok(result) => result,
                    Err(_) => {
                        tracing::warn!("connections still open after the grace period; leaving them");
                        Ok(())
                    }
                }
            }
        };
        cancel.cancel();
        finish_refreshes(&core, grace_ends.get().copied().unwrap_or_else(|| tokio::time::Instant::now() + grace)).await;
        // Every answered token request's audit event is on the queue: write them all.
        core.store.audit_queue().flush().await;
        result
    }
}

/// A refresh runs detached from the request that started it, so the connections closing does
/// not mean it ended: the rotated tokens a provider already issued must be stored before the
/// process exits, or the user has to connect again. Waits for running refreshes
/// until the grace period ends, then gives up this process's leases so another instance need
/// not wait for them to lapse.
async fn finish_refreshes(core: &Core, grace_ends: tokio::time::Instant) {
    let running = core.refresh_locks.running_count();
    if running > 0 {
        tracing::info!(running, "waiting for running token refreshes to store their tokens before exiting");
    }
    if tokio::time::timeout_at(grace_ends, core.refresh_locks.wait_idle()).await.is_err() {
        tracing::warn!("a token refresh was still running when the grace period ended");
    }
    match core.store.grants().release_leases_of(core.refresh_locks.holder()).await {
        Ok(0) => {}
        Ok(released) => tracing::info!(released, "released this process's refresh leases"),
        Err(error) => {
            tracing::warn!(%error, "could not release this process's refresh leases; they lapse on their own")
        }
    }
}

/// After the grace period everything is cancelled; connections get this long to close.
const FINAL_CLOSE: std::time::Duration = std::time::Duration::from_secs(5);

/// Everything but the router, creating what is missing (`serve`, `migrate`, tests).
pub async fn build_state(config: Config, clock: SharedClock) -> anyhow::Result<AppState> {
    build_state_with(config, clock, Opening::Create).await
}

/// Everything but the router from an existing database and key (`admin` commands): refuses
/// clearly instead of creating either ([`crate::startup`]).
pub async fn open_existing_state(config: Config, clock: SharedClock) -> anyhow::Result<AppState> {
    build_state_with(config, clock, Opening::Existing).await
}

async fn build_state_with(config: Config, clock: SharedClock, opening: Opening) -> anyhow::Result<AppState> {
    let store = open_store(&config, opening).await?;
    let sealer = Arc::new(load_sealer(&config, &store, opening).await?);
    let keys = TokenKeys::load_or_create(&store, &sealer, config.issuer(), config.mcp_url().to_string(), clock.now())
        .await
        .context("loading the signing keys")?;
    // Derived from the sealing key, so `admin` commands and restarts agree with the server.
    let demo_client_secret = config.demo.then(|| sealer.derive_secret("demo provider client secret"));
    // Configured providers, plus `demo` (pointing at our own `/demo-provider/…`) when enabled.
    let mut providers = Providers::new(config.providers.clone());
    if let Some(secret) = &demo_client_secret {
        let demo = crate::demo_provider::entry::provider_entry(&config, secret.clone());
        providers = providers.with_required(demo, crate::demo_provider::entry::required_scopes());
        if config.demo_api_keys {
            let keyed = crate::demo_provider::entry::api_key_entry(&config).context("the demo API-key provider")?;
            providers = providers.with(keyed);
        }
    }
    let oidc = crate::identity::oidc::OidcContext::from_config(&config).context("[identity] mode = \"oidc\"")?;
    // PostgreSQL: several instances may share the database, so signals travel.
    let events = match store.backend() {
        crate::store::Backend::Postgres => Events::sending_to_other_instances(store.clone(), clock.clone()),
        crate::store::Backend::Sqlite => Events::new(),
    };
    let config = Arc::new(config);
    let identity = crate::identity::IdentityContext {
        config: config.clone(),
        store: store.clone(),
        clock: clock.clone(),
        sealer: sealer.clone(),
        keys: Arc::new(keys),
        oidc,
        bearer_cache: Default::default(),
        fixed_identity: None,
    };
    let core = Core {
        config,
        store,
        sealer,
        clock,
        http: crate::providers::client::http_client(),
        providers: Arc::new(providers),
        events,
        refresh_locks: Default::default(),
        apps: Default::default(),
    };
    // Stopping the whole server also stops accepting work; draining alone lets work finish.
    let shutdown = tokio_util::sync::CancellationToken::new();
    let draining = shutdown.child_token();
    Ok(AppState::new(crate::state::AppStateFields { core, identity, demo_client_secret, draining, shutdown }))
}

fn router(state: AppState, mcp: McpState) -> Router {
    // The dashboard counts the MCP sessions this instance holds without knowing the MCP face.
    let sessions = mcp.sessions.clone();
    let open_mcp_sessions = crate::web::admin::dashboard::OpenMcpSessions::new(move || sessions.len());
    // Pages for a browser, which may answer with a message page: those keep the signed-in top
    // bar. The MCP face and the token API answer JSON and skip that layer, which would cost
    // each of their calls a clone of the route and a copy of its cookies.
    let mut pages = Router::new()
        .merge(crate::identity::bearer::metadata_router())
        .merge(crate::authorization_server::router())
        .merge(crate::web::router())
        .merge(crate::web::oidc_login::router(state.identity.oidc.clone()));
    if state.core.config.demo {
        pages = pages.nest("/demo-provider", crate::demo_provider::router());
    }
    let pages = pages
        .fallback(unknown_path)
        .layer(axum::middleware::from_fn_with_state(state.clone(), crate::html::top_bar::top_bar_on_error_pages));
    Router::new()
        .merge(crate::mcp::router(mcp))
        .merge(crate::api::router())
        .merge(pages)
        .route("/healthz", axum::routing::get(crate::health::healthz))
        .route("/readyz", axum::routing::get(crate::health::readyz))
        .route("/metrics", axum::routing::get(metrics_on_main_listener))
        .layer(axum::Extension(open_mcp_sessions))
        // Every route counted and timed under its template (`MatchedPath`).
        .layer(axum::middleware::from_fn(crate::telemetry::track_http))
        .layer(crate::telemetry::trace_layer())
        .layer(axum::middleware::from_fn(crate::telemetry::assign_request_id))
        .layer(crate::html::security_headers::layer())
        // Outermost: reads what a refusal left of the request body, so keep-alive survives.
        .layer(axum::middleware::from_fn(crate::net::drain_body::drain_unread_body))
        .with_state(state)
}

/// Any path no route serves: the token API's callers read a problem document, everyone else a
/// page saying what happened and what to do.
async fn unknown_path(uri: axum::http::Uri) -> axum::response::Response {
    use axum::response::IntoResponse;
    if uri.path().starts_with("/v1/") {
        crate::problem::Problem::unknown_path().into_response()
    } else {
        crate::html::page_error::unknown_path().await
    }
}

/// `GET /metrics` on the main listener, as the settings allow ([`crate::telemetry::MetricsAccess`]).
async fn metrics_on_main_listener(
    axum::extract::State(state): axum::extract::State<AppState>,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    use crate::telemetry::MetricsAccess;
    let ops = &state.core.config.ops;
    let access = match (&ops.metrics_listen, &ops.metrics_token) {
        (Some(_), _) => MetricsAccess::ElsewhereOnly,
        (None, Some(token)) => MetricsAccess::Token(token),
        (None, None) => MetricsAccess::Off,
    };
    crate::telemetry::metrics_on_main_listener(access, &headers)
}
