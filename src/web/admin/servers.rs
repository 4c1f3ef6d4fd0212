//! `GET /admin/servers`: the MCP servers behind the broker (gateway mode, issue 26), read only —
//! `oauth-broker admin servers …` changes them. One query, searched and paged like the other
//! lists. Never a secret: a secret-header server shows its header name only.

use axum::extract::State;
use axum::response::Response;

use super::Admin;
use super::listing::{Card, ListQuery};
use super::tables::{Q, field, page};
use crate::clock::iso_time;
use crate::display::safe_text;
use crate::state::AppState;
use crate::store::gateway_servers::GatewayAuth;
use crate::web::error::PageError;

pub async fn servers(State(state): State<AppState>, admin: Admin, query: Q) -> Result<Response, PageError> {
    let query = ListQuery::parse(query)?;
    let found = state.store.page_gateway_servers(&query.search(), query.window()).await?;
    let cards = found
        .rows
        .iter()
        .map(|s| {
            let credential = match &s.auth {
                GatewayAuth::Provider { provider, scopes, header, scheme } => format!(
                    "the user's {provider} token ({}) in {}: {} …",
                    if scopes.is_empty() { "no scopes named".to_owned() } else { scopes.to_space_separated() },
                    header.as_str(),
                    scheme.as_str()
                ),
                GatewayAuth::SecretHeader { header, .. } => format!("an operator's secret in {}", header.as_str()),
                GatewayAuth::McpOauth { settings, .. } => format!(
                    "the user's token from {} (client {}, {}) as Bearer",
                    settings.issuer,
                    settings.client_id,
                    settings.registration.as_str()
                ),
                GatewayAuth::TokenExchange { service_id } => format!(
                    "a token the broker mints for the user and service {service_id}, as Bearer (the server \
                     exchanges it at /token)"
                ),
                GatewayAuth::None => "none".to_owned(),
            };
            Card {
                link: None,
                title: s.name.to_string(),
                fields: vec![
                    field("MCP URL", safe_text(s.url.as_str())),
                    field("tool prefix", s.prefix.to_string()),
                    field("auth", s.auth.kind()),
                    field("each call carries", credential),
                    field("added", iso_time(s.created_at)),
                ],
                actions: vec![],
            }
        })
        .collect();
    let intro = "MCP servers behind the broker: their tools are served on /mcp under the prefix, each call with the \
                 calling user's credential (`oauth-broker admin servers …` changes them).";
    page(&admin, "Servers behind the broker", "/admin/servers", intro, &query, "server", cards, found.next)
}
