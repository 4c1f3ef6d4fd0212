//! The check that a request names a session of its own, and the protocol era it negotiated
//! (both kept in the session's entry, [`super::table`]).
//!
//! A session id is never a credential (MCP security best practices, "session hijacking"): each
//! request is authenticated by its own bearer token, and a session belongs to the user (and the
//! client, see [`crate::identity::ClientIdentity`]) whose token opened it. A request naming a
//! session with another user's or client's token is refused before it reaches rmcp, so nobody
//! can read another's stream or answer their elicitations.
//!
//! SSE priming events (an event id with empty data, SEP-1699) exist from 2025-11-25 on; clients
//! of earlier revisions parse every event's data as JSON and fail on an empty one. rmcp primes
//! every stream, so for sessions that negotiated an older version the data-less events are
//! taken out of the response here ([`PrimingFilter`]).

use std::sync::Arc;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::json;

use super::table::{SessionCheck, SessionTable, primes};
use crate::identity::AuthenticatedUser;

pub const SESSION_HEADER: &str = "mcp-session-id";

/// Who owns a session: the user and the client their token was issued to. Another client of
/// the same user opens its own session (its consents to use connections are its own).
pub(crate) fn owner_key(user: &AuthenticatedUser) -> String {
    format!("{}\n{}", user.user_id, user.client.key())
}

/// Runs after bearer authentication on /mcp.
pub async fn enforce_session_owner(
    State(sessions): State<Arc<SessionTable>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(user) = request.extensions().get::<AuthenticatedUser>().cloned() else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let named = request.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let mut priming = true;
    if let Some(session_id) = &named {
        match sessions.check(session_id, &owner_key(&user)) {
            SessionCheck::Allowed { priming: primes } => priming = primes,
            SessionCheck::Foreign => {
                tracing::warn!(user = %user.user_id, "request named an MCP session of another user or client; refused");
                return rpc_error(StatusCode::FORBIDDEN, "this session belongs to another user or client");
            }
            // An owner we no longer know (ended, forgotten, or from before a restart) cannot be
            // checked, so the session is treated as gone and the client re-initializes (MCP
            // transports: 404 for a terminated session). Never let it through unchecked.
            SessionCheck::Unknown => return rpc_error(StatusCode::NOT_FOUND, "session not found"),
        }
    }
    let is_delete = request.method() == Method::DELETE;
    let response = next.run(request).await;
    let created = response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let filter = match (&named, created) {
        // The initialize response names the new session: it belongs to this user, and its
        // result names the negotiated version.
        (None, Some(created)) => {
            sessions.bind(&created, &owner_key(&user));
            Some(PrimingFilter::Learn { table: sessions.clone(), session_id: created, held: Vec::new() })
        }
        // rmcp closed it (which took it out of the table); should that close have been
        // skipped (rmcp's own close of a parked session's first service came at the same
        // moment), its owner is forgotten all the same, and the session refused from now on.
        (Some(ended), _) if is_delete && response.status().is_success() => {
            sessions.disown(ended);
            None
        }
        _ => (!priming).then_some(PrimingFilter::Drop),
    };
    match filter {
        Some(filter) if is_event_stream(&response) => filter.apply(response),
        _ => response,
    }
}

fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// Takes data-less SSE events (priming events, bare `retry:`) out of a response for sessions on
/// a revision before 2025-11-25 ([`primes`]). Comments (keep-alives) and events with data pass.
enum PrimingFilter {
    /// The session's version is known and older than priming.
    Drop,
    /// An initialize response: hold data-less events until the result names the version, and
    /// record it, before the client sees the result (so its next request finds it).
    Learn { table: Arc<SessionTable>, session_id: String, held: Vec<Bytes> },
    /// Everything passes.
    Keep,
}

impl PrimingFilter {
    fn apply(self, response: Response) -> Response {
        let (parts, body) = response.into_parts();
        let mut filter = self;
        let mut pending: Vec<u8> = Vec::new();
        let events = body.into_data_stream().map(move |chunk| {
            let chunk = chunk?;
            pending.extend_from_slice(&chunk);
            let mut out = Vec::new();
            // rmcp writes whole events ("\n\n"-terminated); a split one waits for its rest.
            while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = pending.drain(..end + 2).collect();
                filter.event(Bytes::from(event), &mut out);
            }
            Ok::<_, axum::Error>(Bytes::from(out))
        });
        // A held or dropped event leaves nothing to send for its chunk.
        let events = events.filter(|chunk| std::future::ready(!matches!(chunk, Ok(bytes) if bytes.is_empty())));
        Response::from_parts(parts, Body::from_stream(events))
    }

    fn event(&mut self, event: Bytes, out: &mut Vec<u8>) {
        let text = String::from_utf8_lossy(&event);
        let data: String = text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        let is_comment = text.lines().all(|line| line.is_empty() || line.starts_with(':'));
        match self {
            _ if is_comment => out.extend_from_slice(&event),
            PrimingFilter::Keep => out.extend_from_slice(&event),
            PrimingFilter::Drop if data.is_empty() => {}
            PrimingFilter::Drop => out.extend_from_slice(&event),
            PrimingFilter::Learn { held, .. } if data.is_empty() => held.push(event),
            PrimingFilter::Learn { table, session_id, held } => {
                let version = serde_json::from_str::<serde_json::Value>(&data)
                    .ok()
                    .and_then(|m| m.pointer("/result/protocolVersion")?.as_str().map(str::to_owned));
                if let Some(version) = &version {
                    table.set_protocol_version(session_id, version);
                }
                let keep = version.as_deref().is_none_or(primes);
                if keep {
                    held.iter().for_each(|e| out.extend_from_slice(e));
                }
                out.extend_from_slice(&event);
                *self = if keep { PrimingFilter::Keep } else { PrimingFilter::Drop };
            }
        }
    }
}

fn rpc_error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": message}}))).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRIMING: &str = "data: \nid: 0\nretry: 3000\n\n";
    const KEEP_ALIVE: &str = ":\n\n";

    fn result(version: &str) -> String {
        format!("data: {{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"protocolVersion\":\"{version}\"}}}}\nid: 1\n\n")
    }

    fn run(filter: &mut PrimingFilter, events: &[&str]) -> String {
        let mut out = Vec::new();
        for event in events {
            filter.event(Bytes::from(event.to_string()), &mut out);
        }
        String::from_utf8(out).unwrap()
    }

    fn registry_with_session() -> Arc<SessionTable> {
        let table = Arc::new(SessionTable::new(Arc::new(crate::clock::ManualClock::new(1_000))));
        table.open_for_test("s1");
        table.bind("s1", "alice");
        table
    }

    fn priming_for(registry: &SessionTable) -> bool {
        match registry.check("s1", "alice") {
            SessionCheck::Allowed { priming } => priming,
            _ => panic!("the session should be alice's"),
        }
    }

    #[test]
    fn an_initialize_result_before_2025_11_25_loses_its_priming_event_and_later_streams_too() {
        let registry = registry_with_session();
        let mut filter = PrimingFilter::Learn { table: registry.clone(), session_id: "s1".into(), held: Vec::new() };
        let body = result("2025-06-18");

        assert_eq!(run(&mut filter, &[PRIMING, &body, KEEP_ALIVE]), format!("{body}{KEEP_ALIVE}"));
        assert!(!priming_for(&registry));
        assert_eq!(run(&mut PrimingFilter::Drop, &[PRIMING, &body]), body);
    }

    #[test]
    fn sessions_on_2025_11_25_keep_priming_events() {
        let registry = registry_with_session();
        let mut filter = PrimingFilter::Learn { table: registry.clone(), session_id: "s1".into(), held: Vec::new() };
        let body = result("2025-11-25");

        assert_eq!(run(&mut filter, &[PRIMING, &body, PRIMING]), format!("{PRIMING}{body}{PRIMING}"));
        assert!(priming_for(&registry));
    }

    #[test]
    fn a_session_whose_version_is_not_known_yet_is_primed() {
        assert!(priming_for(&registry_with_session()));
    }
}
