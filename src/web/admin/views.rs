//! One thing's own page, linked from the lists:
//! - `GET /admin/providers`: each provider's health — the last refresh that worked, the last
//!   that failed and how, failures by kind this week, grants held back by a backoff now;
//! - `GET /admin/services/{id}`: a tool-server service, the consents users gave it and its
//!   recent token-API answers;
//! - `GET /admin/users/{id}`: a user, their grants, consents (and approvals of servers behind
//!   the broker), authorizations and recent audit.
//!
//! Every read is bounded by an index (the user's or client's rows, the newest N of an actor,
//! migration 0028's per-provider rows), so each page costs the same at any table size.

use std::collections::BTreeMap;

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;

use super::charts::Range;
use super::listing::{Card, Field, Rows};
use super::signed_in_admin::Admin;
use super::tables::{
    audit_card, audit_user_ids, field, server_page, service_page, shown_status, user_label, user_labels, user_page,
};
use crate::broker::connection_status::Status;
use crate::clock::iso_time;
use crate::display::safe_text;
use crate::domain::Scopes;
use crate::html::{self, PageError, SignedIn};
use crate::state::AppState;

/// Rows shown per section.
const SHOWN: i64 = 20;

/// A page about one thing: facts, then sections of rows.
#[derive(Template)]
#[template(path = "admin/detail.html")]
pub struct DetailPage {
    pub nav: SignedIn,
    pub admin_nav: Vec<super::sections::NavLink>,
    pub title: String,
    pub intro: String,
    pub facts: Vec<Field>,
    /// (heading, what an empty section says, rows)
    pub sections: Vec<(String, String, Rows)>,
}

pub(super) fn render(
    admin: &Admin,
    path: &str,
    title: String,
    intro: &str,
    facts: Vec<Field>,
    sections: Vec<(String, String, Rows)>,
) -> Response {
    let page = DetailPage {
        nav: SignedIn::of(&admin.0),
        admin_nav: super::sections::links(path),
        title,
        intro: intro.into(),
        facts,
        sections,
    };
    html::render(StatusCode::OK, &page)
}

pub(super) fn section(
    heading: &str,
    empty: &str,
    id: &'static str,
    title_label: &str,
    cards: Vec<Card>,
) -> (String, String, Rows) {
    (heading.into(), empty.into(), Rows::new(id, title_label, cards))
}

pub(super) fn not_found(what: &str) -> PageError {
    PageError::page(
        StatusCode::NOT_FOUND,
        "Not found",
        format!("There is no {what} with this id (it may have been removed)."),
        "Go back to the admin list and pick one from there; nothing was changed.",
    )
}

fn when(at: Option<i64>) -> String {
    at.map_or_else(|| "never recorded".into(), iso_time)
}

pub async fn providers(State(state): State<AppState>, admin: Admin) -> Result<Response, PageError> {
    let now = state.core.now();
    let health: BTreeMap<String, _> =
        state.core.store.console().provider_health().await?.into_iter().map(|h| (h.provider.clone(), h)).collect();
    let window = Range::Week.window(now);
    let mut failures: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for c in state
        .core
        .store
        .console()
        .hourly_counts(window.start)
        .await?
        .into_iter()
        .filter(|c| c.series == "refresh_failures")
    {
        *failures.entry(c.label).or_default().entry(c.sub).or_default() += c.n;
    }
    let mut ids: Vec<String> = state.core.providers.ids();
    ids.extend(health.keys().filter(|p| state.core.providers.find(p).is_none()).cloned());
    let mut cards = Vec::new();
    for id in ids {
        let h = health.get(&id).cloned().unwrap_or_default();
        let kinds = failures.get(&id).map_or_else(
            || "none".into(),
            |k| k.iter().map(|(kind, n)| format!("{} {n}", safe_text(kind))).collect::<Vec<_>>().join(", "),
        );
        let backoff = state.core.store.grants().in_backoff(&id, now).await?;
        let name = state.core.providers.find(&id).map_or_else(
            || format!("{} (not configured)", safe_text(&id)),
            |p| format!("{} ({})", safe_text(&p.display_name), p.id.as_str()),
        );
        cards.push(Card {
            link: Some(format!(
                "/admin/grants?q={}",
                url::form_urlencoded::byte_serialize(id.as_bytes()).collect::<String>()
            )),
            title: name,
            fields: vec![
                field("last refresh that worked", when(h.last_success_at)),
                field(
                    "last failure",
                    match (h.last_failure_at, h.last_failure_kind.as_deref()) {
                        (Some(at), Some(kind)) => format!("{} ({})", iso_time(at), safe_text(kind)),
                        (at, _) => when(at),
                    },
                ),
                field("failures, last 7 days", kinds),
                field("grants in backoff now", backoff.shown()),
            ],
            actions: vec![],
        });
    }
    let intro = "How each provider's refreshes go: the last that worked, the last that failed and why, failures this week \
                 by kind, and how many grants wait out a backoff now (their next refresh is held back).";
    let sections = vec![section("Providers", "No provider is configured.", "rows", "provider", cards)];
    Ok(render(&admin, "/admin/providers", "Provider health".into(), intro, vec![], sections))
}

pub async fn service(
    State(state): State<AppState>,
    admin: Admin,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let Some(service) = state.core.store.services().by_id(&id).await? else { return Err(not_found("service")) };
    let key = format!("service:{}", service.id);
    let consents = state.core.store.consents().for_client(&key, SHOWN).await?;
    let answers = state.core.store.audit().by_actor(&key, SHOWN).await?;
    let mut ids: Vec<&str> = consents.iter().map(|c| c.user_id.as_str()).collect();
    ids.extend(audit_user_ids(&answers));
    let names = user_labels(&state, ids).await?;
    let consent_cards = consents
        .iter()
        .map(|c| Card {
            link: Some(user_page(&c.user_id)),
            title: names.get(&c.user_id).cloned().unwrap_or_else(|| c.user_id.clone()),
            fields: vec![field("scopes", c.scopes.to_space_separated()), field("allowed", iso_time(c.updated_at))],
            actions: vec![],
        })
        .collect();
    let answer_cards = answers.iter().map(|e| audit_card(e, &names)).collect();
    let orgs = super::tables::slugs_of(&state, &[&service.organization]).await?;
    let facts = vec![
        field("client id", service.id.clone()),
        field("organization", orgs.get(&service.organization).cloned().unwrap_or_default()),
        field("providers", service.providers.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(" ")),
        field("resource", service.resource.as_ref().map_or("none".into(), |r| r.to_string())),
        field("proxy only", if service.proxy_only { "yes" } else { "no" }),
        field("trusted", if service.trusted { "yes" } else { "no" }),
        field("registered", iso_time(service.created_at)),
    ];
    let sections = vec![
        section("Consents", "No user has allowed this service yet.", "consents", "user", consent_cards),
        section("Recent token-API answers", "This service has not asked yet.", "answers", "action", answer_cards),
    ];
    let intro =
        "A tool server registered for the token API: who allowed it, and what it was answered lately (newest first).";
    Ok(render(
        &admin,
        &service_page(&service.id),
        format!("Service {}", safe_text(&service.name)),
        intro,
        facts,
        sections,
    ))
}

pub async fn user(State(state): State<AppState>, admin: Admin, Path(id): Path<String>) -> Result<Response, PageError> {
    let Some(user) = state.core.store.users().by_id(&id).await? else { return Err(not_found("user")) };
    let now = state.core.now();
    let grants = state.core.store.grants().for_user(&user.id).await?;
    let consents = state.core.store.consents().for_user(&user.id).await?;
    let authorizations = state.core.store.authorizations().for_user(&user.id, SHOWN).await?;
    let audit = state.core.store.audit().entries(Some(&user.id), SHOWN).await?;
    let names = user_labels(&state, audit_user_ids(&audit)).await?;
    let grant_cards = grants
        .iter()
        .map(|g| Card {
            link: None,
            title: format!("{} · {}", safe_text(&g.provider), g.account_label.as_deref().map_or("—".into(), safe_text)),
            fields: vec![
                field("status", Status::of(Some(g), now, &Scopes::default(), None).describe()),
                field("scopes", g.scopes.to_space_separated()),
                field("expires", g.expires_at.map_or("never said".into(), iso_time)),
                field("updated", iso_time(g.updated_at)),
                field("id", g.id.clone()),
            ],
            actions: vec![],
        })
        .collect();
    let grant_names: BTreeMap<&str, String> = grants.iter().map(|g| (g.id.as_str(), safe_text(&g.provider))).collect();
    let consent_cards = consents
        .iter()
        .map(|c| Card {
            link: c.client_key.strip_prefix("service:").map(service_page),
            title: safe_text(&c.client_key),
            fields: vec![
                field(
                    "connection",
                    grant_names.get(c.grant_id.as_str()).cloned().unwrap_or_else(|| c.grant_id.clone()),
                ),
                field("scopes", c.scopes.to_space_separated()),
                field("allowed", iso_time(c.updated_at)),
            ],
            actions: vec![],
        })
        .collect::<Vec<_>>();
    // The (client, server) pairs the user approved for servers behind the broker, beside the
    // clients' consents to use connections.
    let approvals = state.core.store.gateway_consents().for_user(&user.id).await?;
    let consent_cards = consent_cards
        .into_iter()
        .chain(approvals.iter().map(|a| Card {
            link: Some(server_page(&a.server_id)),
            title: safe_text(&a.client_key),
            fields: vec![field("server", safe_text(&a.server_name)), field("allowed", iso_time(a.created_at))],
            actions: vec![],
        }))
        .collect();
    let authorization_cards = authorizations
        .iter()
        .map(|a| Card {
            link: None,
            title: format!("{} · {}", safe_text(&a.provider), shown_status(a, now)),
            fields: vec![
                field("scopes", a.scopes.to_space_separated()),
                field("failure", a.failure.as_deref().map_or("none".into(), safe_text)),
                field("created", iso_time(a.created_at)),
                field("id", a.id.clone()),
            ],
            actions: vec![],
        })
        .collect();
    let audit_cards = audit.iter().map(|e| audit_card(e, &names)).collect();
    let org_cards = state
        .core
        .store
        .organizations()
        .of_user(&user.id)
        .await?
        .into_iter()
        .map(|(org, role)| Card {
            link: Some(super::orgs::org_page(org.slug.as_str())),
            title: org.slug.to_string(),
            fields: vec![field("name", safe_text(&org.name)), field("role", role.as_str())],
            actions: vec![],
        })
        .collect();
    let facts = vec![
        field("id", user.id.clone()),
        field("kind", if user.username.is_some() { "local account" } else { "external (OIDC)" }),
        field("issuer", safe_text(&user.issuer)),
        field("role", if user.is_admin() { "admin" } else { "user" }),
        field("status", user.disabled_at.map_or("enabled".into(), |at| format!("disabled {}", iso_time(at)))),
        field("created", iso_time(user.created_at)),
    ];
    let sections = vec![
        section("Organizations", "In no organization.", "organizations", "organization", org_cards),
        section("Grants", "No connected account.", "grants", "provider · account", grant_cards),
        section("Consents", "No client allowed.", "consents", "client", consent_cards),
        section("Authorizations", "No connect attempt.", "authorizations", "provider · status", authorization_cards),
        section("Recent audit", "Nothing recorded.", "audit", "action", audit_cards),
    ];
    let intro = "One account: its organizations, what it connected, which clients it allowed, its connect attempts and what the audit log says (newest 20 of each).";
    Ok(render(&admin, &user_page(&user.id), format!("User {}", user_label(&user)), intro, facts, sections))
}
