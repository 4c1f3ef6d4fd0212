//! `GET /admin/servers`: the MCP servers behind the broker (gateway mode), read only —
//! `oauth-broker admin servers …` changes them. One query, searched and paged like the other
//! lists, and one for the page's stored lists (how many tools each has). Never a secret: a
//! secret-header server shows its header name only.
//!
//! `GET /admin/servers/{id}`: one server, with how each call is authorized, how many tools,
//! prompts and resources it listed when last read, and the newest
//! approvals of it — which user allowed which client to call it (one bounded read, migration
//! 0035's index). Withdrawing is the user's, on their connections page.

use axum::extract::{Path, State};
use axum::response::Response;

use super::listing::{Card, ListHeader, ListQuery};
use super::signed_in_admin::Admin;
use super::tables::{Q, field, page, server_page, user_labels, user_page};
use crate::clock::iso_time;
use crate::display::safe_text;
use crate::html::PageError;
use crate::state::AppState;
use crate::store::gateway::ListSummary;
use crate::store::gateway::{GatewayAuth, GatewayServerRow};

/// Approvals shown on a server's page.
const APPROVALS_SHOWN: i64 = 20;

/// What each call to the server carries, in words (never the secret itself).
fn credential(auth: &GatewayAuth) -> String {
    match auth {
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
            "a token the broker mints for the user and service {service_id}, as Bearer (the server exchanges it at \
             /token)"
        ),
        GatewayAuth::None => "none".to_owned(),
    }
}

fn facts(s: &GatewayServerRow) -> Vec<super::listing::Field> {
    vec![
        field("MCP URL", safe_text(s.url.as_str())),
        field("tool prefix", s.prefix.to_string()),
        field("auth", s.auth.kind()),
        field("each call carries", credential(&s.auth)),
        field("added", iso_time(s.created_at)),
    ]
}

/// How many tools the broker last read of the server (the list's one line of it).
fn tools_field(lists: &ListSummary) -> super::listing::Field {
    match lists.tools {
        Some(tools) => field("tools", tools.to_string()),
        None => field("tools", "not read yet (its connect tool is listed)"),
    }
}

/// What the broker last read of the server's lists (shared by every instance).
fn listed(lists: &ListSummary, per_user: bool) -> Vec<super::listing::Field> {
    let Some(tools) = lists.tools else {
        return vec![field("tools", "not read yet: no user has connected it (its connect tool is listed)")];
    };
    let changed_at = lists.tools_stored_at.map(iso_time).unwrap_or_default();
    let count = |n: Option<usize>| n.map_or_else(|| "not read".to_owned(), |n| n.to_string());
    vec![
        field("tools", format!("{tools} (the list last changed {changed_at})")),
        field("prompts", count(lists.prompts)),
        if per_user {
            field("resources", format!("each user's own, read when they list (templates: {})", count(lists.templates)))
        } else {
            field("resources", format!("{} (templates: {})", count(lists.resources), count(lists.templates)))
        },
    ]
}

pub async fn servers(State(state): State<AppState>, admin: Admin, query: Q) -> Result<Response, PageError> {
    let query = ListQuery::parse(query)?;
    let found = state.core.store.gateway_servers().page(&query.search(), query.window()).await?;
    let ids: Vec<&str> = found.rows.iter().map(|s| s.id.as_str()).collect();
    let stored = state.core.store.gateway_lists().for_servers(&ids).await?;
    let cards = found
        .rows
        .iter()
        .map(|s| {
            let mut fields = facts(s);
            fields.push(tools_field(&ListSummary::of(&s.id, &stored)));
            Card { link: Some(server_page(&s.id)), title: s.name.to_string(), fields, actions: vec![] }
        })
        .collect();
    let intro = "MCP servers behind the broker: their tools are served on /mcp under the prefix, each call with the \
                 calling user's credential (`oauth-broker admin servers …` changes them).";
    page(
        &admin,
        ListHeader { title: "Servers behind the broker", path: "/admin/servers", intro, title_label: "server" },
        &query,
        cards,
        found.next,
    )
}

pub async fn server(
    State(state): State<AppState>,
    admin: Admin,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let Some(server) = state.core.store.gateway_servers().by_id(&id).await? else {
        return Err(super::views::not_found("server"));
    };
    let approvals = state.core.store.gateway_consents().for_server(&server.id, APPROVALS_SHOWN).await?;
    let lists = ListSummary::of(&server.id, &state.core.store.gateway_lists().of(&server.id).await?);
    let names = user_labels(&state, approvals.iter().map(|a| a.user_id.as_str())).await?;
    let cards = approvals
        .iter()
        .map(|a| Card {
            link: Some(user_page(&a.user_id)),
            title: names.get(&a.user_id).cloned().unwrap_or_else(|| a.user_id.clone()),
            fields: vec![
                field("client", a.client_name.as_deref().map_or_else(|| safe_text(&a.client_key), safe_text)),
                field("client key", safe_text(&a.client_key)),
                field("allowed", iso_time(a.created_at)),
            ],
            actions: vec![],
        })
        .collect();
    let sections = vec![super::views::section(
        "Approvals (newest 20)",
        "No user has allowed a client to call this server yet.",
        "approvals",
        "user",
        cards,
    )];
    let intro = format!(
        "A server behind the broker: how each call is authorized, and which user allowed which client to call it \
         (newest first). Users withdraw an approval on their connections page; the audit log has its calls (search \
         for server={}).",
        server.name
    );
    Ok(super::views::render(
        &admin,
        &server_page(&server.id),
        format!("Server {}", server.name),
        &intro,
        facts(&server).into_iter().chain(listed(&lists, server.auth.per_user())).collect(),
        sections,
    ))
}
