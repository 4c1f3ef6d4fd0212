//! `GET /admin/webhooks`: the newest deliveries to services' webhooks, dead letters
//! first, with a button that queues a delivered or dead event again. Shows what the outbox
//! holds — type, status, attempts, the last error — never a secret.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::Response;

use super::listing::{Card, CardAction, ListHeader, ListQuery, RawListQuery};
use super::signed_in_admin::Admin;
use super::tables::{field, hidden};
use crate::clock::iso_time;
use crate::display::safe_text;
use crate::html::PageError;
use crate::state::AppState;
use crate::store::webhooks::DeliveryStatus;

/// How many deliveries the page shows.
const SHOWN: i64 = 200;

pub async fn list(
    State(state): State<AppState>,
    admin: Admin,
    query: Result<Query<RawListQuery>, QueryRejection>,
) -> Result<Response, PageError> {
    let query = ListQuery::parse(query)?;
    let mut rows = state.core.store.webhook_events().list(None, Some(DeliveryStatus::Dead), SHOWN).await?;
    rows.extend(
        state
            .core
            .store
            .webhook_events()
            .list(None, None, SHOWN)
            .await?
            .into_iter()
            .filter(|r| r.status != DeliveryStatus::Dead),
    );
    let cards = rows
        .iter()
        .map(|row| Card {
            link: None,
            title: format!("{} · {} · {}", safe_text(&row.service_id), row.event_type, row.status.as_str()),
            fields: vec![
                field("event id", row.event_id.clone()),
                field("attempts", row.attempts.to_string()),
                field("last error", row.last_error.as_deref().map_or("none".into(), safe_text)),
                field("created", iso_time(row.created_at)),
                field(
                    "next attempt",
                    if row.status == DeliveryStatus::Pending { iso_time(row.next_attempt_at) } else { "—".into() },
                ),
            ],
            actions: if row.status == DeliveryStatus::Pending {
                vec![]
            } else {
                vec![CardAction {
                    path: "/admin/webhooks/resend".into(),
                    label: "Send again".into(),
                    fields: vec![hidden("event_id", &row.event_id)],
                }]
            },
        })
        .collect();
    let intro = "Events sent to tool servers' webhooks, dead letters first, then the newest. \
                 `oauth-broker admin services set-webhook …` sets a webhook.";
    super::tables::page(
        &admin,
        ListHeader { title: "Webhooks", path: "/admin/webhooks", intro, title_label: "service · event · status" },
        &query,
        cards,
        None,
    )
}
