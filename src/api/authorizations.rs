//! `GET /v1/authorizations/{id}` (optionally long-polling with `?wait=N`) and
//! `GET /v1/authorizations/{id}/events` (server-sent events): where an authorization a service
//! caused stands, so the tool server can send `notifications/elicitation/complete` to its own
//! 2025-11-25 client the moment the user finishes, or answer a 2026-07-28 client's waiting retry.
//!
//! Only the service that caused an authorization sees it: any other id — unknown, another
//! service's, an MCP client's — is the same 404. The database row is the truth; the in-process
//! "authorization finished" signal only wakes a waiter early, and a waiter also re-reads the row
//! every [`RECHECK`] in case the browser finished on another instance.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::authenticated_service::AuthenticatedService;
use super::wait_slots::WaitSlot;
use crate::broker::authorizations::{self, Outcome};
use crate::domain::ElicitationId;
use crate::problem::Problem;
use crate::state::AppState;
use crate::store::authorizations::AuthorizationRow;
use crate::store::token_api::ServiceRow;

/// Longest long-poll a caller may ask for.
pub const MAX_WAIT_SECONDS: u64 = 60;
/// How often a waiter re-reads the row without a signal.
const RECHECK: Duration = Duration::from_secs(2);

#[derive(Debug, Deserialize, utoipa::IntoParams)]
// A query parameter (the handler takes it through a `Result`, which utoipa cannot see into).
#[into_params(parameter_in = Query)]
pub struct WaitQuery {
    /// Seconds to wait for a final status (at most 60); 0 or absent answers at once.
    #[serde(default)]
    pub wait: Option<u64>,
}

/// Where an authorization stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct AuthorizationStatusBody {
    pub id: String,
    /// `pending`, `completed`, `declined`, `failed` or `expired`.
    pub status: &'static str,
    pub provider: String,
    /// The broker's page where the user finishes it.
    pub url: String,
    pub expires_at: i64,
    /// Why it failed (a short code), for `failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The status will not change any more (the stream ends after it).
    #[serde(skip)]
    #[schema(ignore)]
    pub is_final: bool,
}

/// An authorization's status, optionally waiting for it to finish.
#[utoipa::path(
    get, path = "/v1/authorizations/{id}", tag = "authorizations",
    params(("id" = String, Path, description = "The authorization id from `authorization_required`"), WaitQuery),
    security(("service" = [])),
    responses(
        (status = 200, description = "Its status (still `pending` when the wait ran out)", body = AuthorizationStatusBody),
        (status = 404, description = "unknown_authorization", content_type = "application/problem+json"),
        (status = 401, description = "invalid_client", content_type = "application/problem+json"),
        (status = 429, description = "rate_limited: the request budget or the open-wait cap is used up; retry after `retry_after` seconds", content_type = "application/problem+json"),
    )
)]
pub async fn show(
    State(state): State<AppState>,
    AuthenticatedService(service): AuthenticatedService,
    Path(id): Path<String>,
    query: Result<Query<WaitQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(query)) = query else {
        return Problem::invalid_request("wait must be a number of seconds").into_response();
    };
    let wait = Duration::from_secs(query.wait.unwrap_or(0).min(MAX_WAIT_SECONDS));
    // Subscribe before the first read, so a finish in between still wakes us.
    let mut events = state.core.events.subscribe();
    let mut row = match owned_row(&state, &service, &id).await {
        Ok(row) => row,
        Err(problem) => return problem.into_response(),
    };
    // A wait holds one of the service's slots until it answers (dropped on return).
    let _slot = if wait.is_zero() || Outcome::of(&row, state.core.now()).is_final() {
        None
    } else {
        match WaitSlot::take(&state, &service).await {
            Ok(slot) => Some(slot),
            Err(problem) => return problem.into_response(),
        }
    };
    let deadline = tokio::time::Instant::now() + wait;
    while !Outcome::of(&row, state.core.now()).is_final() && tokio::time::Instant::now() < deadline {
        tokio::select! {
            // Stopping: the status as it is now; the caller asks again (another instance).
            _ = state.draining.cancelled() => break,
            _ = tokio::time::sleep_until(deadline) => break,
            _ = tokio::time::sleep(RECHECK) => {}
            _ = events.recv() => {}
        }
        row = match owned_row(&state, &service, &id).await {
            Ok(row) => row,
            Err(problem) => return problem.into_response(),
        };
    }
    Json(status_body(&state, &row)).into_response()
}

/// The same status as a stream: one `status` event now and one on each change, ending after a
/// final status (or at shutdown).
#[utoipa::path(
    get, path = "/v1/authorizations/{id}/events", tag = "authorizations",
    params(("id" = String, Path, description = "The authorization id from `authorization_required`")),
    security(("service" = [])),
    responses(
        (status = 200, description = "`text/event-stream` of `status` events, each an AuthorizationStatusBody", content_type = "text/event-stream"),
        (status = 404, description = "unknown_authorization", content_type = "application/problem+json"),
        (status = 429, description = "rate_limited: the request budget or the open-wait cap is used up", content_type = "application/problem+json"),
    )
)]
pub async fn events(
    State(state): State<AppState>,
    AuthenticatedService(service): AuthenticatedService,
    Path(id): Path<String>,
) -> Response {
    let events = state.core.events.subscribe();
    let row = match owned_row(&state, &service, &id).await {
        Ok(row) => row,
        Err(problem) => return problem.into_response(),
    };
    let first = status_body(&state, &row);
    // The stream holds one of the service's slots while open (the watch drops it).
    let slot = if first.is_final {
        None
    } else {
        match WaitSlot::take(&state, &service).await {
            Ok(slot) => Some(slot),
            Err(problem) => return problem.into_response(),
        }
    };
    let watch = Watch { state, service, id, events, last: None, pending: Some(first), done: false, _slot: slot };
    let stream = futures::stream::unfold(watch, |mut watch| async move {
        let body = watch.next().await?;
        let event = Event::default().event("status").json_data(&body).unwrap_or_else(|_| Event::default());
        Some((Ok::<_, Infallible>(event), watch))
    });
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

/// The state of one SSE watcher.
struct Watch {
    state: AppState,
    service: ServiceRow,
    id: String,
    events: tokio::sync::broadcast::Receiver<crate::events::AuthorizationFinished>,
    last: Option<AuthorizationStatusBody>,
    pending: Option<AuthorizationStatusBody>,
    done: bool,
    /// This stream's wait slot, freed when the stream is dropped.
    _slot: Option<WaitSlot>,
}

impl Watch {
    /// The next status to send, or `None` to end the stream.
    async fn next(&mut self) -> Option<AuthorizationStatusBody> {
        loop {
            if let Some(body) = self.pending.take() {
                self.done = body.is_final;
                self.last = Some(body.clone());
                return Some(body);
            }
            if self.done {
                return None;
            }
            tokio::select! {
                // Stopping: the stream ends and the caller reconnects (another instance).
                _ = self.state.draining.cancelled() => return None,
                _ = tokio::time::sleep(RECHECK) => {}
                _ = self.events.recv() => {}
            }
            let row = owned_row(&self.state, &self.service, &self.id).await.ok()?;
            let body = status_body(&self.state, &row);
            if self.last.as_ref() != Some(&body) {
                self.pending = Some(body);
            }
        }
    }
}

/// The row, if this service caused it; every other case is the same 404.
async fn owned_row(state: &AppState, service: &ServiceRow, id: &str) -> Result<AuthorizationRow, Problem> {
    if ElicitationId::parse(id).is_err() {
        return Err(Problem::unknown_authorization());
    }
    match state.core.store.authorizations().by_id(id).await? {
        Some(row) if row.client_key == service.client().key() => Ok(row),
        _ => Err(Problem::unknown_authorization()),
    }
}

fn status_body(state: &AppState, row: &AuthorizationRow) -> AuthorizationStatusBody {
    let outcome = Outcome::of(row, state.core.now());
    AuthorizationStatusBody {
        is_final: outcome.is_final(),
        id: row.id.clone(),
        status: outcome.as_str(),
        provider: row.provider.clone(),
        url: authorizations::connect_url(&state.core, &row.id).to_string(),
        expires_at: row.expires_at,
        failure: match outcome {
            Outcome::Failed(reason) => Some(reason),
            _ => None,
        },
    }
}
