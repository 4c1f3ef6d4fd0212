//! `GET /admin/{users,grants,authorizations,consents,clients,services,audit}`: each list as a
//! table (cards on a phone), searchable and paginated ([`super::listing`]). Never a token: grants show what the
//! store says about them (status, scopes, expiry, the last refresh's outcome from the audit
//! log), not their sealed values. Text others chose passes through [`safe_text`].

use std::collections::HashMap;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;

use super::listing::{Card, CardAction, Field, ListHeader, ListQuery, RawListQuery, TablePage};
use super::signed_in_admin::Admin;
use crate::broker::connection_status::Status;
use crate::clock::iso_time;
use crate::display::safe_text;
use crate::domain::{OrganizationId, Scopes};
use crate::html::{self, PageError, SignedIn};
use crate::state::AppState;
use crate::store::audit::AuditEntry;
use crate::store::paging::Cursor;
use crate::store::users::User;

pub(super) type Q = Result<Query<RawListQuery>, QueryRejection>;

/// The list page for rows the store already searched and paged (`next`: where the next page
/// starts, when more match).
pub(super) fn page(
    admin: &Admin,
    header: ListHeader<'_>,
    query: &ListQuery,
    cards: Vec<Card>,
    next: Option<Cursor>,
) -> Result<Response, PageError> {
    let page = TablePage::build(SignedIn::of(&admin.0), header, query, cards, next);
    Ok(html::render(StatusCode::OK, &page))
}

pub(super) fn field(label: &str, value: impl Into<String>) -> Field {
    Field { label: label.to_owned(), value: value.into(), note: None }
}

/// A field with a secondary fact on its second line.
pub(super) fn noted(label: &str, value: impl Into<String>, note: impl Into<String>) -> Field {
    Field { note: Some(note.into()), ..field(label, value) }
}

pub(super) fn hidden(name: &str, value: &str) -> (String, String) {
    (name.to_owned(), value.to_owned())
}

/// A user as pages name them: username, else the issuer's display name, else the subject.
pub fn user_label(user: &User) -> String {
    safe_text(user.username.as_deref().or(user.display_name.as_deref()).unwrap_or(&user.subject))
}

/// The labels of the users with these ids (one query for a page's rows).
pub async fn user_labels<'a>(
    state: &AppState,
    ids: impl IntoIterator<Item = &'a str>,
) -> Result<HashMap<String, String>, PageError> {
    let mut ids: Vec<&str> = ids.into_iter().collect();
    ids.sort_unstable();
    ids.dedup();
    Ok(state.core.store.users().by_ids(&ids).await?.iter().map(|u| (u.id.clone(), user_label(u))).collect())
}

/// A user's own page ([`super::views::user`]).
pub fn user_page(id: &str) -> String {
    format!("/admin/users/{}", url::form_urlencoded::byte_serialize(id.as_bytes()).collect::<String>())
}

/// A server behind the broker's own page ([`super::servers::server`]).
pub fn server_page(id: &str) -> String {
    format!("/admin/servers/{}", url::form_urlencoded::byte_serialize(id.as_bytes()).collect::<String>())
}

/// A service's own page ([`super::views::service`]).
pub fn service_page(id: &str) -> String {
    format!("/admin/services/{}", url::form_urlencoded::byte_serialize(id.as_bytes()).collect::<String>())
}

fn name_of(names: &HashMap<String, String>, id: &str) -> String {
    names.get(id).cloned().unwrap_or_else(|| format!("(gone) {id}"))
}

pub async fn users(State(state): State<AppState>, admin: Admin, query: Q) -> Result<Response, PageError> {
    let query = ListQuery::parse(query)?;
    let found = state.core.store.users().page(&query.search(), query.window()).await?;
    let cards = found
        .rows
        .iter()
        .map(|u| {
            let disabled = u.is_disabled();
            Card {
                link: Some(user_page(&u.id)),
                title: user_label(u),
                fields: vec![
                    field("id", u.id.clone()),
                    field("kind", if u.username.is_some() { "local account" } else { "external (OIDC)" }),
                    field("issuer", safe_text(&u.issuer)),
                    field("role", if u.is_admin() { "admin" } else { "user" }),
                    field("status", u.disabled_at.map_or("enabled".into(), |at| format!("disabled {}", iso_time(at)))),
                    field("created", iso_time(u.created_at)),
                ],
                actions: vec![CardAction {
                    path: "/admin/users/disable".into(),
                    label: if disabled { "Enable" } else { "Disable" }.into(),
                    fields: vec![hidden("user_id", &u.id), hidden("disabled", if disabled { "false" } else { "true" })],
                }],
            }
        })
        .collect();
    let intro = "Every account. Disabling one signs it out everywhere and stops its bearer tokens; it cannot sign in until enabled.";
    page(
        &admin,
        ListHeader { title: "Users", path: "/admin/users", intro, title_label: "user" },
        &query,
        cards,
        found.next,
    )
}

pub async fn grants(State(state): State<AppState>, admin: Admin, query: Q) -> Result<Response, PageError> {
    let query = ListQuery::parse(query)?;
    let found = state.core.store.grants().page(&query.search(), query.window()).await?;
    let names = user_labels(&state, found.rows.iter().map(|g| g.user_id.as_str())).await?;
    let now = state.core.now();
    let mut cards = Vec::with_capacity(found.rows.len());
    for g in &found.rows {
        let audit = state.core.store.audit().refreshes_and_failures(&g.user_id, &g.provider, 20).await?;
        let last = last_refresh(&audit, &g.user_id, &g.provider);
        // The core's status: the same words as the user's connections page.
        let status = Status::of(Some(g), now, &Scopes::default(), None);
        cards.push(Card {
            link: Some(user_page(&g.user_id)),
            title: format!("{} · {}", safe_text(&g.provider), g.account_label.as_deref().map_or("—".into(), safe_text)),
            // Eight columns fit 1280 px: each secondary fact sits under the one it qualifies.
            fields: vec![
                field("user", name_of(&names, &g.user_id)),
                match status.retry_at() {
                    Some(at) => noted("status", status.describe(), format!("next refresh not before {}", iso_time(at))),
                    None => field("status", status.describe()),
                },
                field("scopes", g.scopes.to_space_separated()),
                noted(
                    "expires",
                    match g.expires_at {
                        Some(at) if at <= now => format!("{} (expired)", iso_time(at)),
                        Some(at) => iso_time(at),
                        None => "never said".into(),
                    },
                    if g.refresh_token_sealed.is_some() { "refresh token held" } else { "no refresh token" },
                ),
                {
                    let shown =
                        last.map_or("none recorded".into(), |(at, outcome)| format!("{} {outcome}", iso_time(at)));
                    match last_error(&audit, &g.user_id, &g.provider) {
                        Some(error) => noted("last refresh", shown, format!("last error: {error}")),
                        None => field("last refresh", shown),
                    }
                },
                noted("id", g.id.clone(), format!("updated {}", iso_time(g.updated_at))),
            ],
            actions: vec![CardAction {
                path: "/admin/grants/revoke".into(),
                label: "Revoke".into(),
                fields: vec![hidden("grant_id", &g.id)],
            }],
        });
    }
    let intro = "Stored third-party grants (never their tokens). Revoking one tells the provider and deletes it; this page then says what the provider answered.";
    page(
        &admin,
        ListHeader { title: "Grants", path: "/admin/grants", intro, title_label: "provider · account" },
        &query,
        cards,
        found.next,
    )
}

/// The latest refresh of (user, provider) in the audit log: when, and how it ended.
fn last_refresh(audit: &[AuditEntry], user_id: &str, provider: &str) -> Option<(i64, &'static str)> {
    audit.iter().find_map(|e| {
        if e.user_id.as_deref() != Some(user_id) || e.provider.as_deref() != Some(provider) {
            return None;
        }
        match e.action.as_str() {
            "grant.refreshed" => Some((e.at, "refreshed")),
            "grant.needs_reconsent" => Some((e.at, "refused by the provider (needs a new consent)")),
            _ => None,
        }
    })
}

/// The latest failure recorded for (user, provider), as the audit log words it.
fn last_error(audit: &[AuditEntry], user_id: &str, provider: &str) -> Option<String> {
    audit
        .iter()
        .filter(|e| e.user_id.as_deref() == Some(user_id) && e.provider.as_deref() == Some(provider))
        .find(|e| is_failure(e))
        .map(|e| {
            format!(
                "{} {}{}",
                iso_time(e.at),
                e.action,
                e.detail.as_deref().map(|d| format!(" ({})", safe_text(d))).unwrap_or_default()
            )
        })
}

/// Whether an entry records something going wrong (its outcome, or for an entry without one,
/// its action's name).
pub fn is_failure(e: &AuditEntry) -> bool {
    match e.outcome.as_deref() {
        Some(outcome) => outcome != "success",
        None => crate::store::audit::Outcome::of_action(&e.action) != crate::store::audit::Outcome::Success,
    }
}

pub async fn authorizations(State(state): State<AppState>, admin: Admin, query: Q) -> Result<Response, PageError> {
    let query = ListQuery::parse(query)?;
    let now = state.core.now();
    let found = state
        .core
        .store
        .authorizations()
        .page_filtered(&query.search(), query.filters.status, now, query.window())
        .await?;
    let names = user_labels(&state, found.rows.iter().map(|a| a.user_id.as_str())).await?;
    // Named by what the broker knows (registered name and client id, token label, service),
    // never by the name a client reports for itself, which any program can claim.
    let clients =
        crate::broker::consent::client_names(&state.core, found.rows.iter().map(|a| a.client_key.as_str())).await;
    let cards = found
        .rows
        .iter()
        .map(|a| {
            let status = shown_status(a, now);
            let client = &clients[&a.client_key];
            let open = status == "pending" || status == "redirected";
            Card {
                link: Some(user_page(&a.user_id)),
                title: format!("{} · {}", safe_text(&a.provider), status),
                fields: vec![
                    field("user", name_of(&names, &a.user_id)),
                    field("kind", a.kind.as_str()),
                    field("client", format!("{} ({})", client.name, client.kind)),
                    field("calls itself", calls_itself(a.client_name.as_deref())),
                    field("scopes", a.scopes.to_space_separated()),
                    field("failure", a.failure.as_deref().map_or("none".into(), safe_text)),
                    field("created", iso_time(a.created_at)),
                    field("expires", iso_time(a.expires_at)),
                    field("id", a.id.clone()),
                ],
                actions: if open {
                    vec![CardAction {
                        path: "/admin/authorizations/expire".into(),
                        label: "Expire".into(),
                        fields: vec![hidden("id", &a.id)],
                    }]
                } else {
                    vec![]
                },
            }
        })
        .collect();
    let intro = "Connect attempts: pending, completed, declined, failed and expired. Expiring an open one makes its link stop working.";
    page(
        &admin,
        ListHeader { title: "Authorizations", path: "/admin/authorizations", intro, title_label: "provider · status" },
        &query,
        cards,
        found.next,
    )
}

/// The name a client reported for itself (MCP `clientInfo`), marked as such.
pub fn calls_itself(reported: Option<&str>) -> String {
    match reported.map(str::trim).filter(|n| !n.is_empty()) {
        Some(name) => format!("\u{201c}{}\u{201d} (its own word, unchecked)", safe_text(name)),
        None => "nothing".into(),
    }
}

/// The status, with an open attempt past its expiry shown as `expired`.
pub fn shown_status(a: &crate::store::authorizations::AuthorizationRow, now: i64) -> &'static str {
    a.shown_status(now)
}

pub async fn consents(State(state): State<AppState>, admin: Admin, query: Q) -> Result<Response, PageError> {
    let query = ListQuery::parse(query)?;
    let found = state.core.store.consents().page(&query.search(), query.window()).await?;
    let names = user_labels(&state, found.rows.iter().map(|c| c.user_id.as_str())).await?;
    let mut grants = HashMap::new();
    for c in &found.rows {
        if let Some(g) = state.core.store.grants().by_id(&c.grant_id).await? {
            let label =
                format!("{} · {}", safe_text(&g.provider), g.account_label.as_deref().map_or("—".into(), safe_text));
            grants.insert(g.id, label);
        }
    }
    let clients =
        crate::broker::consent::client_names(&state.core, found.rows.iter().map(|c| c.client_key.as_str())).await;
    let mut cards = Vec::new();
    for c in found.rows {
        let client = &clients[&c.client_key];
        cards.push(Card {
            link: Some(c.client_key.strip_prefix("service:").map_or_else(|| user_page(&c.user_id), service_page)),
            title: format!("{} ({})", client.name, client.kind),
            fields: vec![
                field("user", name_of(&names, &c.user_id)),
                field("connection", grants.get(&c.grant_id).cloned().unwrap_or_else(|| c.grant_id.clone())),
                field("client key", safe_text(&c.client_key)),
                field("scopes", c.scopes.to_space_separated()),
                field("allowed", iso_time(c.updated_at)),
            ],
            actions: vec![CardAction {
                path: "/admin/consents/withdraw".into(),
                label: "Withdraw".into(),
                fields: vec![hidden("grant_id", &c.grant_id), hidden("client_key", &c.client_key)],
            }],
        });
    }
    let intro = "Which clients each user allowed to use which connection. Withdrawing one makes that client ask again.";
    page(
        &admin,
        ListHeader { title: "Consents", path: "/admin/consents", intro, title_label: "client" },
        &query,
        cards,
        found.next,
    )
}

pub async fn clients(State(state): State<AppState>, admin: Admin, query: Q) -> Result<Response, PageError> {
    let query = ListQuery::parse(query)?;
    let found = state.core.store.oauth_clients().page(&query.search(), query.window()).await?;
    let cards = found
        .rows
        .iter()
        .map(|c| Card {
            link: None,
            title: c.client_name.as_deref().map_or_else(|| "(no name)".into(), safe_text),
            fields: vec![
                field("client id", safe_text(&c.client_id)),
                field("authentication", format!("{:?}", c.token_endpoint_auth_method)),
                field("redirect URIs", safe_text(&c.redirect_uris.join(" "))),
                field("scope", c.scope.as_ref().map_or("none registered".into(), |s| s.to_space_separated())),
                field("refresh tokens", if c.refresh_allowed { "yes" } else { "no" }),
                field("registered", iso_time(c.created_at)),
            ],
            actions: vec![],
        })
        .collect();
    let intro =
        "MCP clients registered with the broker's own authorization server (names are the clients' own, unchecked).";
    page(
        &admin,
        ListHeader { title: "MCP clients", path: "/admin/clients", intro, title_label: "name" },
        &query,
        cards,
        found.next,
    )
}

pub async fn services(State(state): State<AppState>, admin: Admin, query: Q) -> Result<Response, PageError> {
    let query = ListQuery::parse(query)?;
    let found = state.core.store.services().page(&query.search(), query.window()).await?;
    let ids: Vec<_> = found.rows.iter().map(|s| &s.organization).collect();
    let orgs = slugs_of(&state, &ids).await?;
    let cards = found
        .rows
        .iter()
        .map(|s| Card {
            link: Some(service_page(&s.id)),
            title: s.name.clone(),
            fields: vec![
                field("client id", s.id.clone()),
                field("organization", orgs.get(&s.organization).cloned().unwrap_or_default()),
                field("providers", s.providers.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(" ")),
                field("resource", s.resource.as_ref().map_or("none".into(), |r| r.to_string())),
                field("proxy only", if s.proxy_only { "yes" } else { "no" }),
                field("trusted", if s.trusted { "yes" } else { "no" }),
                field("updated", iso_time(s.updated_at)),
            ],
            actions: vec![],
        })
        .collect();
    let intro = "Tool servers registered for the token API (`oauth-broker admin services …` changes them).";
    page(
        &admin,
        ListHeader { title: "Tool-server services", path: "/admin/services", intro, title_label: "service" },
        &query,
        cards,
        found.next,
    )
}

pub async fn audit(State(state): State<AppState>, admin: Admin, query: Q) -> Result<Response, PageError> {
    let query = ListQuery::parse(query)?;
    let found = state.core.store.audit().page_filtered(&query.search(), query.filters.audit(), query.window()).await?;
    let names = user_labels(&state, audit_user_ids(&found.rows)).await?;
    let cards = found.rows.iter().map(|e| audit_card(e, &names)).collect();
    let intro = "What happened, newest first: who acted, about whom, and how it ended. Never holds a secret.";
    page(
        &admin,
        ListHeader { title: "Audit log", path: "/admin/audit", intro, title_label: "action" },
        &query,
        cards,
        found.next,
    )
}

/// The users audit entries name: as the target, or as the acting user or admin.
pub fn audit_user_ids(entries: &[AuditEntry]) -> impl Iterator<Item = &str> {
    entries.iter().flat_map(|e| {
        let actor = e.actor.as_deref().and_then(|a| a.strip_prefix("admin:").or_else(|| a.strip_prefix("user:")));
        e.user_id.as_deref().into_iter().chain(actor)
    })
}

/// An audit entry's actor for people: `admin alice`, `user bob`, `service <id>`, `cli`, ….
pub fn actor_label(actor: Option<&str>, names: &HashMap<String, String>) -> String {
    match actor.and_then(|a| a.split_once(':')) {
        Some((kind @ ("user" | "admin"), id)) => format!("{kind} {}", name_of(names, id)),
        Some((kind, id)) => format!("{kind} {}", safe_text(id)),
        None => actor.map_or("—".into(), safe_text),
    }
}

pub fn audit_card(e: &AuditEntry, names: &HashMap<String, String>) -> Card {
    Card {
        link: None,
        title: e.action.clone(),
        fields: vec![
            field("time", iso_time(e.at)),
            field("actor", actor_label(e.actor.as_deref(), names)),
            field("outcome", e.outcome.as_deref().unwrap_or("—")),
            field("user", e.user_id.as_deref().map_or("—".into(), |id| name_of(names, id))),
            field("provider", e.provider.as_deref().map_or("—".into(), safe_text)),
            field("detail", e.detail.as_deref().map_or("—".into(), safe_text)),
        ],
        actions: vec![],
    }
}

/// The slugs of these organizations (one read for a page's rows; a gone one shows its id).
pub async fn slugs_of(state: &AppState, ids: &[&OrganizationId]) -> Result<HashMap<OrganizationId, String>, PageError> {
    let found = state.core.store.organizations().slugs_of(ids).await?;
    Ok(ids
        .iter()
        .map(|id| ((*id).clone(), found.get(*id).map_or_else(|| id.to_string(), ToString::to_string)))
        .collect())
}
