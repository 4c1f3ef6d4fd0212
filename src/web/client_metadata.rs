//! `GET /oauth/client-metadata/{provider}`: the broker's client ID metadata document for an
//! `mcp-oauth` server registered that way (MCP 2025-11-25 basic/authorization §Client ID
//! Metadata Documents; [`crate::providers::mcp_oauth::registration`]). Served only while the
//! provider's `client_id` is this very URL, so nothing else is ever described here.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::providers::mcp_oauth::registration::{BrokerClient, metadata_document};
use crate::providers::mcp_oauth::{client_name, metadata_document_path};
use crate::state::AppState;

pub async fn show(State(state): State<AppState>, Path(provider): Path<String>) -> Response {
    let Some(provider) = state.core.providers.find(&provider) else { return StatusCode::NOT_FOUND.into_response() };
    let url = state.core.config.url(&metadata_document_path(&provider.id));
    if provider.client_id != url.as_str() {
        return StatusCode::NOT_FOUND.into_response();
    }
    let client = BrokerClient {
        client_name: client_name(&state.core.config.public_url),
        redirect_uri: state.core.config.provider_redirect_uri(&provider.id),
        metadata_document: Some(url.clone()),
    };
    Json(metadata_document(&url, &client)).into_response()
}
