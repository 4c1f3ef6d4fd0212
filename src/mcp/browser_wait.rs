//! Waiting for what the user does in the browser with an authorization the broker opened (a
//! connection, a client's consent, a (client, server) approval): the row in the database is the
//! truth, every signal or lag is a reason to read it again, and the wait is bounded, cancelled
//! with the call and cut short when the server starts stopping.
//!
//! - 2025-11-25: `connect_account` waits within its call after the nested URL elicitation
//!   ([`wait_for_row`], [`final_outcome`]).
//! - 2026-07-28: a retry whose state sent the user to the browser waits here first
//!   ([`after_browser`]), bounded by `mrtr_wait`; any tool, prompt or resource read then runs
//!   with the grant or the permission.

use rmcp::model::{CallToolResult, ElicitationAction, ErrorData, ProgressNotificationParam};
use serde_json::json;
use tokio::time::Instant;

use super::context::Context;
use super::failure::tool_failed;
use super::input_required::state::refused;
use super::results::{Unfinished, error_result, text_result};
use super::tools::catalogue::{CONNECT_ACCOUNT, unknown_provider};
use crate::broker::connections;
use crate::broker::gateway_consent::server_named;
use crate::config::ProviderConfig;
use crate::events::AuthorizationFinished;
use crate::mcp::forms::questions;
use crate::store::authorizations::{AuthorizationKind, AuthorizationRow, AuthorizationStatus};
use crate::store::grants::GrantRow;

/// `(id, version)` of the user's grants before a connection, to tell which one it produced.
pub type Snapshot = Vec<(String, i64)>;

/// How [`wait_for_row`] ended.
pub enum Waited {
    /// The row finished or expired (or is gone): read it for the outcome.
    Finished,
    Cancelled,
    /// The server is stopping: answer now rather than hold the stop.
    Stopping,
    TimedOut,
}

/// MCP 2026-07-28: a retry whose state sent the user to the browser (see
/// [`crate::mcp::input_required`]). A `decline` in `inputResponses` ends it at once;
/// otherwise the retry waits, bounded by `mrtr_wait`, for the row to finish. `None` once the
/// user completed it: the tool runs, now with the grant or the permission. For
/// `connect_account` the connection is the result; declined, failed or expired, the outcome;
/// still open, an `InputRequiredResult` with the same state, and the client retries.
pub async fn after_browser(cx: Context<'_>, tool: &str) -> Result<Option<CallToolResult>, Unfinished> {
    let Some(round) = &cx.caller.round else { return Ok(None) };
    let Some(id) = round.authorization() else { return Ok(None) };
    // Subscribe before the first read, so a browser finishing in between is not missed.
    let mut events = cx.core.events.subscribe();
    let row = cx.core.store.authorizations().by_id(id).await.map_err(tool_failed)?;
    // The state is bound to this user already; a row of anyone else is never described.
    let Some(row) = row.filter(|r| r.user_id == cx.caller.user.user_id) else {
        return Err(refused().into());
    };
    if row.kind == AuthorizationKind::Server {
        return after_server_approval(cx, &row, tool, &mut events).await;
    }
    let Some(provider) = cx.core.providers.find(&row.provider) else {
        return Ok(Some(error_result(unknown_provider(&cx.core.providers.ids(), &row.provider))));
    };
    match round.authorize_response() {
        Some(ElicitationAction::Decline) => return Ok(Some(declined_in_client(cx, &row, &provider).await)),
        Some(ElicitationAction::Cancel) => return Ok(Some(error_result(cancelled_text(&provider, tool)))),
        _ => {}
    }
    let deadline = Instant::now() + cx.core.config.mrtr_wait;
    match wait_for_row(cx, &row.id, &provider.display_name, deadline, &mut events).await? {
        Waited::Finished => {}
        Waited::Cancelled => return Ok(Some(error_result("Cancelled."))),
        // A stopping server answers at once: the client retries, to another instance.
        Waited::Stopping | Waited::TimedOut => return Err(round.still_waiting().into()),
    }
    let row = cx.core.store.authorizations().by_id(id).await.map_err(tool_failed)?;
    if tool != CONNECT_ACCOUNT && row.as_ref().is_some_and(|r| r.status == AuthorizationStatus::Completed) {
        return Ok(None);
    }
    let outcome = final_outcome(cx, &provider, id, &Vec::new()).await?;
    Ok(Some(outcome.unwrap_or_else(|| {
        error_result(format!("Connecting {} did not finish; call {tool} again.", provider.display_name))
    })))
}

/// [`after_browser`] for a row that approves only a (client, server) pair:
/// `None` once approved, so the server's tool runs.
async fn after_server_approval(
    cx: Context<'_>,
    row: &AuthorizationRow,
    tool: &str,
    events: &mut tokio::sync::broadcast::Receiver<AuthorizationFinished>,
) -> Result<Option<CallToolResult>, Unfinished> {
    let Some(round) = &cx.caller.round else { return Ok(None) };
    let server = server_named(row);
    match round.authorize_response() {
        Some(ElicitationAction::Decline) => {
            let now = cx.core.now();
            let _ = cx
                .core
                .store
                .authorizations()
                .finish(&row.id, AuthorizationStatus::Declined, Some("declined_in_client"), now)
                .await;
            return Ok(Some(error_result(format!("You declined to let this client call the server {server}."))));
        }
        Some(ElicitationAction::Cancel) => return Ok(Some(error_result("Cancelled."))),
        _ => {}
    }
    let deadline = Instant::now() + cx.core.config.mrtr_wait;
    let what = format!("the server {server}");
    match wait_for_row(cx, &row.id, &what, deadline, events).await? {
        Waited::Finished => {}
        Waited::Cancelled => return Ok(Some(error_result("Cancelled."))),
        Waited::Stopping | Waited::TimedOut => return Err(round.still_waiting().into()),
    }
    let row = cx.core.store.authorizations().by_id(&row.id).await.map_err(tool_failed)?;
    Ok(match row.map(|r| r.status) {
        Some(AuthorizationStatus::Completed) => None,
        Some(AuthorizationStatus::Declined) => {
            Some(error_result(format!("You declined to let this client call the server {server}.")))
        }
        _ => Some(error_result(format!("Approving the server {server} did not finish; call {tool} again."))),
    })
}

/// Waits until authorization `id` has finished (or expired), `deadline` passes, the call is
/// cancelled or the server starts stopping; sends progress meanwhile when the client asked
/// for it. Every signal (or a lag) is a reason to read the row again: the row decides.
pub async fn wait_for_row(
    cx: Context<'_>,
    id: &str,
    what: &str,
    deadline: Instant,
    events: &mut tokio::sync::broadcast::Receiver<AuthorizationFinished>,
) -> Result<Waited, ErrorData> {
    let progress_token = cx.request.meta.get_progress_token();
    let mut ticks = 0u32;
    loop {
        let row = cx.core.store.authorizations().by_id(id).await.map_err(tool_failed)?;
        let open = row.as_ref().is_some_and(|row| {
            !matches!(
                row.status,
                AuthorizationStatus::Completed | AuthorizationStatus::Declined | AuthorizationStatus::Failed
            ) && !row.is_expired(cx.core.now())
        });
        if !open {
            return Ok(Waited::Finished);
        }
        tokio::select! {
            _ = cx.request.ct.cancelled() => return Ok(Waited::Cancelled),
            _ = cx.app.draining.cancelled() => return Ok(Waited::Stopping),
            _ = tokio::time::sleep_until(deadline) => return Ok(Waited::TimedOut),
            _ = tokio::time::sleep(cx.core.config.progress_interval) => {
                ticks += 1;
                if let Some(token) = &progress_token {
                    let note = ProgressNotificationParam::new(token.clone(), f64::from(ticks))
                        .with_message(format!("Waiting for you to approve {what} in the browser"));
                    let _ = cx.request.peer.notify_progress(note).await;
                }
            }
            event = events.recv() => {
                let _ = event;
            }
        }
    }
}

/// The tool result once the row has finished, or `None` while it is still open.
pub async fn final_outcome(
    cx: Context<'_>,
    provider: &ProviderConfig,
    id: &str,
    before: &Snapshot,
) -> Result<Option<CallToolResult>, ErrorData> {
    let row = cx.core.store.authorizations().by_id(id).await.map_err(tool_failed)?;
    let Some(row) = row else {
        return Ok(Some(error_result("The connect link disappeared; call connect_account again.")));
    };
    Ok(match row.status {
        AuthorizationStatus::Completed => match row.grant_id.as_deref() {
            // Consent-only: the grant the user allowed, whatever else changed meanwhile.
            Some(grant_id) if row.kind == AuthorizationKind::Consent => {
                let grants =
                    connections::accounts(cx.core, &cx.caller.user.user_id, provider).await.map_err(tool_failed)?;
                Some(match grants.iter().find(|g| g.id == grant_id) {
                    Some(grant) => connected_result(provider, grant),
                    None => error_result(format!(
                        "That {} connection was removed meanwhile; call connect_account again.",
                        provider.display_name
                    )),
                })
            }
            _ => Some(completed_result(cx, provider, before).await?),
        },
        AuthorizationStatus::Declined => Some(error_result(declined_text(&row, provider))),
        AuthorizationStatus::Failed => Some(error_result(format!(
            "Connecting {} failed ({}). Call connect_account to try again.",
            provider.display_name,
            row.failure.as_deref().unwrap_or("unknown reason")
        ))),
        _ if row.is_expired(cx.core.now()) => {
            Some(error_result("The connect link expired; call connect_account again."))
        }
        _ => None,
    })
}

/// The result once a connection completed: the grant it created or changed (the row does
/// not record which account the user picked at the provider).
async fn completed_result(
    cx: Context<'_>,
    provider: &ProviderConfig,
    before: &Snapshot,
) -> Result<CallToolResult, ErrorData> {
    let grants = connections::accounts(cx.core, &cx.caller.user.user_id, provider).await.map_err(tool_failed)?;
    let changed = grants
        .iter()
        .filter(|g| !before.iter().any(|(id, version)| *id == g.id && *version == g.version))
        .max_by_key(|g| (g.updated_at, g.version));
    let grant = changed.or_else(|| questions::most_recent(&grants).map(|i| &grants[i]));
    Ok(match grant {
        Some(grant) => connected_result(provider, grant),
        None => error_result(format!("Not connected to {}.", provider.display_name)),
    })
}

/// The user said no in the client: the row ends declined, and the result says so.
pub async fn declined_in_client(cx: Context<'_>, row: &AuthorizationRow, provider: &ProviderConfig) -> CallToolResult {
    let now = cx.core.now();
    let _ = cx
        .core
        .store
        .authorizations()
        .finish(&row.id, AuthorizationStatus::Declined, Some("declined_in_client"), now)
        .await;
    error_result(declined_text(row, provider))
}

pub fn cancelled_text(provider: &ProviderConfig, tool: &str) -> String {
    format!("Connecting {} was cancelled. Call {tool} again when you are ready.", provider.display_name)
}

fn declined_text(row: &AuthorizationRow, provider: &ProviderConfig) -> String {
    match row.kind {
        AuthorizationKind::Connect => format!("You declined to connect {}.", provider.display_name),
        AuthorizationKind::Consent => {
            format!("You declined to let this client use your {} connection.", provider.display_name)
        }
        AuthorizationKind::Server => {
            format!("You declined to let this client call the server {}.", server_named(row))
        }
    }
}

/// `connect_account`'s result for a connected account.
pub fn connected_result(provider: &ProviderConfig, grant: &GrantRow) -> CallToolResult {
    let account = grant.account_label.as_deref().map(|a| format!(" as {a}")).unwrap_or_default();
    let mut result = text_result(format!(
        "Connected to {}{account} with scopes: {}.",
        provider.display_name,
        grant.scopes.to_space_separated()
    ));
    result.structured_content = Some(json!({
        "provider": provider.id.as_str(),
        "connected": true,
        "account": grant.account_label,
        "scopes": grant.scopes,
    }));
    result
}
