//! `GET /admin/orgs` and `/admin/orgs/{slug}`: the organizations this broker serves, searched
//! and paged, and one organization's members, oldest first (`oauth-broker admin orgs …` changes
//! them). Operators see every organization.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;

use super::listing::{Card, ListHeader, ListQuery};
use super::signed_in_admin::Admin;
use super::tables::{Q, field, page, user_label, user_page};
use crate::clock::iso_time;
use crate::display::safe_text;
use crate::domain::OrgSlug;
use crate::html::PageError;
use crate::state::AppState;

/// Where an organization's page is.
pub fn org_page(slug: &str) -> String {
    format!("/admin/orgs/{slug}")
}

pub async fn list(State(state): State<AppState>, admin: Admin, query: Q) -> Result<Response, PageError> {
    let query = ListQuery::parse(query)?;
    let found = state.core.store.organizations().page(&query.search(), query.window()).await?;
    let cards = found
        .rows
        .iter()
        .map(|o| Card {
            link: Some(org_page(o.slug.as_str())),
            title: o.slug.to_string(),
            fields: vec![
                field("name", safe_text(&o.name)),
                field("id", o.id.to_string()),
                field("created", iso_time(o.created_at)),
            ],
            actions: vec![],
        })
        .collect();
    let intro = "The organizations this broker serves, by slug: each has its own members and services \
                 (`oauth-broker admin orgs …` changes them).";
    page(
        &admin,
        ListHeader { title: "Organizations", path: "/admin/orgs", intro, title_label: "organization" },
        &query,
        cards,
        found.next,
    )
}

pub async fn members(
    State(state): State<AppState>,
    admin: Admin,
    Path(slug): Path<String>,
    query: Q,
) -> Result<Response, PageError> {
    let query = ListQuery::parse(query)?;
    let missing = || {
        PageError::page(
            StatusCode::NOT_FOUND,
            "Not found",
            "There is no organization with this slug (it may have been renamed or removed).",
            "Go back to the organizations and pick one from there; nothing was changed.",
        )
    };
    let slug = OrgSlug::parse(&slug).map_err(|_| missing())?;
    let org = state.core.store.organizations().by_slug(&slug).await?.ok_or_else(missing)?;
    if !query.q.is_empty() {
        return Err(PageError::page(
            StatusCode::BAD_REQUEST,
            "Not searched here",
            "An organization's members are listed oldest first, without a search.",
            "Search people on the Users page; nothing was changed.",
        ));
    }
    let found = state.core.store.in_org(&org.id).members().page(query.window()).await?;
    let cards = found
        .rows
        .iter()
        .map(|m| Card {
            link: Some(user_page(&m.user.id)),
            title: user_label(&m.user),
            fields: vec![
                field("role", m.role.as_str()),
                field("joined", iso_time(m.joined_at)),
                field("user id", m.user.id.clone()),
            ],
            actions: vec![],
        })
        .collect();
    let title = format!("{} — members", safe_text(&org.name));
    let path = org_page(org.slug.as_str());
    let apps = state.core.store.in_org(&org.id).provider_apps().in_use().await?;
    let own_apps = if apps.is_empty() {
        " It has no OAuth app of its own: its members connect with the operator's apps (where shared).".to_owned()
    } else {
        let each: Vec<String> = apps
            .iter()
            .map(|app| {
                let redirect = crate::broker::provider_apps::redirect_uri(&state.core, app)
                    .map(|u| u.to_string())
                    .unwrap_or_default();
                format!(
                    "{} (version {}, client id {}; redirect URI to register there: {redirect})",
                    app.provider,
                    app.version,
                    safe_text(&app.client_id)
                )
            })
            .collect();
        format!(" Its own OAuth apps: {}.", each.join("; "))
    };
    let intro = format!(
        "Organization {} (id {}), oldest member first. Members use its services; admins also manage them.{own_apps}",
        org.slug, org.id
    );
    page(
        &admin,
        ListHeader { title: &title, path: &path, intro: &intro, title_label: "member" },
        &query,
        cards,
        found.next,
    )
}
