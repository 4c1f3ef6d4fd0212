//! The MCP server (protocol 2025-11-25 over Streamable HTTP, served by rmcp), in rooms:
//!
//! - [`transport`]: how messages travel between rmcp's HTTP service and a session's handler:
//!   the shared HTTP service, the JSON-RPC framing check, each session's transport and the
//!   streams its messages go on, the event log that delivers each SSE event once, request ids.
//! - [`session`]: the live sessions, one entry each in one table (owner, protocol era, scope,
//!   liveness, transport), the one sweep that parks and closes them, the owner check.
//! - [`tools`]: the tool catalogue and its compiled schemas, the broker's tools (`connect`,
//!   `connections`, `provider_request`), completion, and how failures reach the client.
//! - [`prompts`], [`resources`]: the prompt catalogue and the broker's resources.
//! - [`forms`]: form-mode elicitation; [`elicitation`]: URL elicitation, `-32042`, the
//!   completion notification.
//!
//! At the root: [`handler`] (the handler one session's service runs, and who calls),
//! [`server`] (the protocol methods and the dispatch of `tools/call`), [`logging`],
//! [`results`], [`pagination`], [`revision`] (which revision a request speaks),
//! [`subscriptions`] (2026-07-28 `subscriptions/listen`), and [`extension`] (tools, prompts and resources added by an
//! embedding program).
//!
//! The endpoint sits behind bearer authentication ([`crate::identity::bearer`]) and the session
//! owner check ([`session::owner`]), and rmcp validates `Host` and `Origin` against our public URL.

pub mod elicitation;
pub mod extension;
pub mod forms;
pub mod gateway;
pub mod handler;
pub mod input_required;
pub mod logging;
pub mod pagination;
pub mod prompts;
pub mod resources;
pub mod results;
pub mod revision;
pub mod server;
pub mod session;
pub mod subscriptions;
pub mod tools;
pub mod transport;

use std::sync::Arc;

use axum::Router;
use axum::middleware;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::state::AppState;
use handler::BrokerServer;

/// What the MCP face adds to [`AppState`]: its live sessions, the extensions, the prompt
/// catalogue. Kept here, not in `AppState`, so nothing below the faces (the core, identity,
/// the store) can reach an MCP session or a prompt. The core is `app.core`.
#[derive(Clone)]
pub struct McpState {
    pub app: AppState,
    /// The live MCP sessions: owner, protocol era, scope, liveness and transport of each.
    pub sessions: Arc<session::SessionTable>,
    /// How many sessions are parked (idle, without an rmcp service).
    pub parked: Arc<transport::session_transport::ParkedCount>,
    /// Tools, prompts and resources added through [`crate::app::AppBuilder::extension`].
    pub extensions: extension::Extensions,
    /// The prompt catalogue (built-in, operator files, extensions).
    pub prompts: Arc<prompts::PromptCatalogue>,
    /// The tools served (built-in, then extensions'), with their schemas compiled once.
    pub tools: Arc<tools::schema::ToolCatalogue>,
    /// The MCP servers behind the broker, their tools, and this instance's connections to them.
    pub gateway: Arc<gateway::Gateway>,
}

impl McpState {
    /// The broker's tools, then each extension's that does not reuse a built-in name.
    pub fn tool_catalogue(app: &AppState, extensions: &extension::Extensions) -> tools::schema::ToolCatalogue {
        let mut all = tools::catalogue(&app.core.providers.ids());
        let builtin: std::collections::HashSet<String> = all.iter().map(|t| t.name.to_string()).collect();
        for extension in extensions.iter() {
            all.extend(extension.tools().into_iter().filter(|t| !builtin.contains(t.name.as_ref())));
        }
        tools::schema::ToolCatalogue::new(all)
    }
}

pub fn router(state: McpState) -> Router<AppState> {
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts(&state.app))
        .with_allowed_origins(allowed_origins(&state.app))
        .enforce_origin_validation()
        .with_cancellation_token(state.app.shutdown.child_token());
    let factory_state = state.clone();
    let revive_state = state.clone();
    // A parked session's new service skips the handshake: the client's `initialize` parameters
    // are what rmcp's peer would have kept. Ended with the server, as rmcp's own.
    let reviver: transport::session_transport::Reviver = Arc::new(move |transport, peer_info| {
        let handler = BrokerServer::new(revive_state.clone());
        let ct = revive_state.app.shutdown.child_token();
        Box::new(rmcp::service::serve_directly_with_ct::<
            rmcp::RoleServer,
            _,
            _,
            transport::session_transport::SessionError,
            rmcp::transport::TransportAdapterIdentity,
        >(handler, transport, Some(peer_info), ct))
    });
    let sessions = Arc::new(
        session::manager::BrokerSessions::new(state.sessions.clone(), state.app.draining.clone())
            .with_idle(state.app.core.config.mcp_session_idle)
            .with_parking(
                state.app.core.config.mcp_session_park,
                transport::session_transport::Parking { reviver, parked: state.parked.clone() },
            ),
    );
    sessions.start_sweeping(state.app.shutdown.clone());
    let service = transport::http_service::SharedService::new(StreamableHttpService::new(
        move || Ok(BrokerServer::new(factory_state.clone())),
        sessions,
        config,
    ));
    Router::new()
        .route_service("/mcp", service)
        // Layers run outside-in: bearer first, then the session owner check, then the JSON-RPC
        // framing check (so an unauthenticated request learns nothing but 401), then a retry
        // whose server's question waits on another instance is passed on there.
        .layer(middleware::from_fn_with_state(
            gateway::retry_forward::RetryForward { app: state.app.clone(), gateway: state.gateway.clone() },
            gateway::retry_forward::forward_retries_to_their_flight,
        ))
        .layer(middleware::from_fn(transport::jsonrpc_guard::check_jsonrpc_body))
        .layer(middleware::from_fn_with_state(state.clone(), session::owner::enforce_session_owner))
        .layer(middleware::from_fn_with_state(state.app.clone(), crate::identity::bearer::require_bearer::<AppState>))
}

/// DNS-rebinding defence: only our public host (and loopback names when we listen locally).
fn allowed_hosts(state: &AppState) -> Vec<String> {
    let public = &state.core.config.public_url;
    let mut hosts = Vec::new();
    if let Some(host) = public.host_str() {
        hosts.push(host.to_owned());
        if let Some(port) = public.port() {
            hosts.push(format!("{host}:{port}"));
        }
    }
    if state.core.config.listen.ip().is_loopback() || crate::net::is_loopback(public) {
        hosts.extend(["localhost", "127.0.0.1", "::1", "[::1]"].map(String::from));
    }
    hosts
}

/// Browser origins allowed to call /mcp: our own. A foreign `Origin` gets 403.
fn allowed_origins(state: &AppState) -> Vec<String> {
    let origin = state.core.config.public_url.origin().ascii_serialization();
    let with_port = match state.core.config.public_url.port_or_known_default() {
        Some(port) if !origin.ends_with(&format!(":{port}")) => format!("{origin}:{port}"),
        _ => origin,
    };
    vec![with_port]
}
