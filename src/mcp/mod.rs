//! The MCP server (protocol 2025-11-25 sessions and 2026-07-28 stateless requests over
//! Streamable HTTP, served by rmcp), in rooms:
//!
//! - [`server`]: the handler of one session's service ([`server::BrokerServer`]) and the
//!   protocol's methods; [`caller`] who calls; [`context`] the one request context every tool
//!   and forwarded request is handed; [`state`] what the MCP face adds to the faces' state.
//! - [`tools`]: the broker's tools, each a type parsed once and run with the context, and the
//!   one `tools/call` ([`tools::call`]).
//! - [`access`]: the access decisions tools, the gateway and the extension API share (a token,
//!   or the broker's link in the client's era); [`browser_wait`]: waiting for what the user does
//!   in the browser.
//! - [`gateway`]: the MCP servers behind the broker — forwarding a request, the upstream link,
//!   the catalogue of servers and their lists.
//! - [`prompts`], [`resources`], [`completion`], [`subscriptions`] (2026-07-28
//!   `subscriptions/listen`), [`logging`], [`notifications`] (what a session hears that relates
//!   to no request).
//! - Asking the user: [`forms`] (form mode), [`elicitation`] (URL mode, `-32042`, the completion
//!   notification), [`input_required`] (2026-07-28 round trips and their sealed state).
//! - How answers are shaped: [`results`], [`failure`], [`pagination`], [`revision`] (which
//!   revision a request speaks).
//! - [`transport`]: how messages travel between rmcp's HTTP service and a session's handler;
//!   [`session`]: the live sessions, their sweep and the owner check.
//! - [`extension`]: tools, prompts and resources added by an embedding program.
//!
//! The endpoint sits behind bearer authentication ([`crate::identity::bearer`]) and the session
//! owner check ([`session::owner`]), and rmcp validates `Host` and `Origin` against our public URL.

pub mod access;
pub mod browser_wait;
pub mod caller;
pub mod completion;
pub mod context;
pub mod elicitation;
pub mod extension;
pub mod failure;
pub mod forms;
pub mod gateway;
pub mod input_required;
pub mod logging;
pub mod notifications;
pub mod pagination;
pub mod prompts;
pub mod resources;
pub mod results;
pub mod revision;
pub mod server;
pub mod session;
pub mod state;
pub mod subscriptions;
pub mod tools;
pub mod transport;

use std::sync::Arc;

use axum::Router;
use axum::middleware;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::state::AppState;
use server::BrokerServer;
use state::McpState;

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
            gateway::forward::retry_forward::RetryForward { app: state.app.clone(), gateway: state.gateway.clone() },
            gateway::forward::retry_forward::forward_retries_to_their_flight,
        ))
        .layer(middleware::from_fn(transport::jsonrpc_guard::check_jsonrpc_body))
        .layer(middleware::from_fn_with_state(state.sessions.clone(), session::owner::enforce_session_owner))
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
