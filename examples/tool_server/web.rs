//! The HTTP face: `/mcp` (rmcp's Streamable HTTP service) behind a bearer-token presence check,
//! and the RFC 9728 protected-resource metadata that tells MCP clients to get that token from
//! the broker (MCP 2025-11-25 basic/authorization §Authorization Server Discovery).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use secrecy::SecretString;
use serde_json::json;
use url::Url;

use super::tool::{Shared, ToolServer};

/// The caller's bearer token, as sent; handed to the broker, never looked into here.
#[derive(Clone)]
pub struct UserToken(pub SecretString);

/// What the metadata and the challenge say about this resource.
pub struct Resource {
    /// `--resource`: our MCP URL, the audience the broker checks in the user token.
    pub url: Url,
    /// The broker's issuer identifier.
    pub authorization_server: String,
}

impl Resource {
    // RFC 9728 §3.1: the well-known path goes between the host and the resource's path.
    fn metadata_url(&self) -> String {
        let origin = self.url.origin().ascii_serialization();
        let path = self.url.path().trim_end_matches('/');
        format!("{origin}/.well-known/oauth-protected-resource{path}")
    }
}

pub fn router(shared: Arc<Shared>, resource: Arc<Resource>, allowed_hosts: Vec<String>) -> Router {
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts)
        .with_allowed_origins([origin_with_port(&resource.url)])
        .enforce_origin_validation()
        // Ends open SSE streams at shutdown, which would otherwise hold it forever.
        .with_cancellation_token(shared.shutdown.child_token());
    let service = StreamableHttpService::new(
        move || Ok(ToolServer::new(shared.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Router::new()
        .route_service("/mcp", service)
        .layer(middleware::from_fn_with_state(resource.clone(), require_bearer))
        // Served at the root too, for clients that look there first.
        .route("/.well-known/oauth-protected-resource", get(metadata))
        .route("/.well-known/oauth-protected-resource/mcp", get(metadata))
        .with_state(resource)
}

/// `scheme://host:port`, as rmcp's Origin check wants it (an entry without a port is deprecated).
fn origin_with_port(url: &Url) -> String {
    let origin = url.origin().ascii_serialization();
    match url.port_or_known_default() {
        Some(port) if url.port().is_none() => format!("{origin}:{port}"),
        _ => origin,
    }
}

// RFC 9728 §3.2.
async fn metadata(State(resource): State<Arc<Resource>>) -> Response {
    let body = json!({
        "resource": resource.url.as_str(),
        "authorization_servers": [resource.authorization_server],
        "bearer_methods_supported": ["header"],
        "resource_name": "oauth-broker example tool server",
    });
    ([(header::CACHE_CONTROL, "max-age=300")], Json(body)).into_response()
}

// RFC 6750 §2.1 (header only) and §3; MCP 2025-11-25 basic/authorization §Protected Resource
// Metadata Discovery. Only presence is checked here: the token is verified by the broker when
// the tool uses it (`broker.rs`), so a bad token costs one refused tool call, not a 401 now.
async fn require_bearer(State(resource): State<Arc<Resource>>, mut request: Request, next: Next) -> Response {
    let mut values = request.headers().get_all(header::AUTHORIZATION).iter();
    let token = match (values.next(), values.next()) {
        (Some(value), None) => value
            .to_str()
            .ok()
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|token| !token.is_empty())
            .map(|token| UserToken(SecretString::from(token))),
        _ => None,
    };
    let Some(token) = token else {
        return challenge(&resource);
    };
    request.extensions_mut().insert(token);
    next.run(request).await
}

/// 401 naming our metadata, so the client can find the broker and get a token for us.
fn challenge(resource: &Resource) -> Response {
    let body = json!({"error": "invalid_request", "error_description": "a bearer token is required"});
    let mut response = (StatusCode::UNAUTHORIZED, Json(body)).into_response();
    let value = format!("Bearer resource_metadata=\"{}\"", resource.metadata_url());
    if let Ok(value) = HeaderValue::from_str(&value) {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    response
}
