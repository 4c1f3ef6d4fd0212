//! A server's own questions reach the user: a server
//! behind the broker sends `elicitation/create` during a forwarded request (a tool call, a
//! `prompts/get`, a `resources/read`); the broker asks the user's client in its place and passes
//! the answer back.
//!
//! - **Which client**: rmcp marks a request from the server with the upstream request whose
//!   response stream carried it (`InboundStreamOrigin`, SEP-2260). Each forwarded call
//!   (and plain request) registers its upstream request id ([`Questions::route_call`]), so the
//!   question goes to the client request that caused it. The connection is its user's alone ([`super::pool`]), so a
//!   question can never reach another user's client. A question on no call's stream goes to
//!   the connection's one call in flight, and is refused when there are none or several.
//! - **Form mode** (MCP 2025-11-25 client/elicitation §Form mode): a nested `elicitation/create`
//!   on the client's call stream, the message saying which server asks; accept (with its
//!   content), decline and cancel go back as the client gave them.
//! - **URL mode** (§URL mode): only an `https` URL, or `http` to a loopback address, with no
//!   credentials in it, passed unchanged; anything else is refused to the server. The message
//!   names the server and the page's host, never presents the page as the broker's. The
//!   server's `elicitationId` is replaced by one of the broker's, so a server can neither
//!   collide with nor complete an elicitation of the broker's or of another server's; its
//!   `notifications/elicitation/complete` is passed on, under the broker's id, to the session
//!   that was asked ([`Questions::take_link`]).
//! - **A client that did not declare the mode**: the server gets `-32602`, as MCP 2025-11-25
//!   client/elicitation says for a mode the client did not declare.
//! - **2026-07-28 clients** take no requests of the server's mid-call: the question becomes an
//!   `InputRequiredResult` of the broker's while the call waits on this instance
//!   ([`super::flights`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ElicitRequestParams, ElicitResult, ErrorData, RequestId};
use rmcp::service::{InboundStreamOrigin, RequestContext, ServiceError};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::registry::ServerEntry;
use crate::mcp::handler::{BrokerServer, Caller};
use crate::mcp::results::error_result;
use crate::mcp::session::scope::SessionScope;

/// A question from the server, and where its answer goes.
pub struct Question {
    pub params: ElicitRequestParams,
    pub answer: oneshot::Sender<Result<ElicitResult, ErrorData>>,
}

/// A relayed URL elicitation waiting for the server's completion notification.
struct Link {
    /// The id the client was given.
    ours: String,
    session: Weak<SessionScope>,
    until: Instant,
}

/// The questions of one upstream connection: the calls in flight that can take one, and the
/// URL elicitations whose completion the client is still to hear of.
#[derive(Default)]
pub struct Questions {
    calls: Mutex<HashMap<RequestId, mpsc::Sender<Question>>>,
    links: Mutex<HashMap<String, Link>>,
}

/// A forwarded call's registration; removed when dropped.
pub struct CallRoute {
    questions: Arc<Questions>,
    id: RequestId,
}

impl Drop for CallRoute {
    fn drop(&mut self) {
        self.questions.calls().remove(&self.id);
    }
}

impl Questions {
    fn calls(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, mpsc::Sender<Question>>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn links(&self) -> std::sync::MutexGuard<'_, HashMap<String, Link>> {
        self.links.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The questions the server asks within the upstream request `id`, until the route drops.
    pub fn route_call(self: &Arc<Self>, id: RequestId) -> (CallRoute, mpsc::Receiver<Question>) {
        // One at a time: a server asks the next question after the user answered this one.
        let (sender, receiver) = mpsc::channel(1);
        self.calls().insert(id.clone(), sender);
        (CallRoute { questions: self.clone(), id }, receiver)
    }

    /// Hands the server's question to the call it belongs to and waits for the answer.
    pub async fn ask(
        &self,
        origin: Option<&InboundStreamOrigin>,
        params: ElicitRequestParams,
    ) -> Result<ElicitResult, ErrorData> {
        let call = {
            let calls = self.calls();
            match origin {
                Some(InboundStreamOrigin::OutboundRequest(id)) => calls.get(id).cloned(),
                _ if calls.len() == 1 => calls.values().next().cloned(),
                _ => None,
            }
        };
        let Some(call) = call else {
            return Err(ErrorData::invalid_request(
                "the broker relays a question only within a request it forwarded to you",
                None,
            ));
        };
        let (answer, answered) = oneshot::channel();
        if call.send(Question { params, answer }).await.is_err() {
            return Err(call_ended());
        }
        answered.await.unwrap_or_else(|_| Err(call_ended()))
    }

    /// Remembers that the client knows the server's URL elicitation `theirs` as `ours`.
    fn remember_link(&self, theirs: String, ours: String, session: &Arc<SessionScope>, ttl: Duration) {
        let now = Instant::now();
        let mut links = self.links();
        links.retain(|_, link| link.until > now);
        links.insert(theirs, Link { ours, session: Arc::downgrade(session), until: now + ttl });
    }

    /// The session asked for the server's elicitation `theirs`, and the id it knows it by.
    pub fn take_link(&self, theirs: &str) -> Option<(Arc<SessionScope>, String)> {
        let link = self.links().remove(theirs)?;
        if link.until <= Instant::now() {
            return None;
        }
        Some((link.session.upgrade()?, link.ours))
    }
}

fn call_ended() -> ErrorData {
    ErrorData::internal_error("the tool call ended before the user answered", None)
}

/// Why a URL is not shown to the user, for the server.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum UrlRefused {
    #[error("not a URL")]
    Unparsable,
    #[error("only https URLs (or http to a loopback address) are relayed")]
    Scheme,
    #[error("a URL with a user name or password is not relayed")]
    Credentials,
}

/// The URL the client may be sent: `https`, or `http` to this machine (a local tool's page);
/// never one carrying credentials (MCP 2025-11-25 client/elicitation §URL mode, safe URL
/// handling).
pub fn checked_url(url: &str) -> Result<url::Url, UrlRefused> {
    let parsed = url::Url::parse(url).map_err(|_| UrlRefused::Unparsable)?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(UrlRefused::Credentials);
    }
    let loopback = match parsed.host() {
        Some(url::Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    };
    match parsed.scheme() {
        "https" if parsed.host().is_some() => Ok(parsed),
        "http" if loopback => Ok(parsed),
        _ => Err(UrlRefused::Scheme),
    }
}

/// A form's message, saying who asks.
pub fn form_message(server: &str, message: &str) -> String {
    format!("The server {server} (behind this broker) asks: {message}")
}

/// A link's message: whose page it is and where, so it is never taken for the broker's own.
pub fn url_message(server: &str, message: &str, url: &url::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    format!(
        "The server {server} (behind this broker) asks you to open a page of its own on {host}: {message} This page is {server}'s, not the broker's."
    )
}

/// What the server hears when the client of a 2026-07-28 call cannot be asked.
pub fn unaskable_error(server: &str) -> ErrorData {
    ErrorData::invalid_request(
        format!("the user's client (MCP 2026-07-28) cannot be asked a question in the middle of a call to {server}"),
        None,
    )
}

/// The tool result of a 2026-07-28 call whose server asked a question.
pub fn unaskable_result(server: &str, params: &ElicitRequestParams) -> CallToolResult {
    let (mode, message) = match params {
        ElicitRequestParams::FormElicitationParams { message, .. } => ("form", message.as_str()),
        ElicitRequestParams::UrlElicitationParams { message, .. } => ("url", message.as_str()),
        _ => ("unknown", ""),
    };
    let mut result = error_result(format!(
        "The server {server} asked a question in the middle of the call (\"{message}\"), which a client of this protocol revision (2026-07-28) cannot be asked mid-call; the call was stopped. Use a 2025-11-25 session for this tool."
    ));
    result.structured_content = Some(json!({"error": "question_not_relayable", "server": server, "mode": mode}));
    result
}

/// Why a server's question is not shown to the user's client.
#[derive(Debug)]
pub(super) enum NotShown {
    /// The client did not declare this elicitation mode (`"form"` or `"url"`).
    Undeclared(&'static str),
    /// The URL is not one a client may be sent.
    Url(UrlRefused),
    /// A mode the broker does not relay.
    UnknownMode,
}

impl NotShown {
    /// The mode asked for, as the refusals name it.
    pub(super) fn mode(&self) -> &'static str {
        match self {
            NotShown::Undeclared(mode) => mode,
            NotShown::Url(_) => "url",
            NotShown::UnknownMode => "unknown",
        }
    }

    /// The reason, for the server (the error it reads as the answer to its question).
    pub(super) fn for_server(&self, server: &str) -> ErrorData {
        refused(match self {
            NotShown::Undeclared(mode) => format!(
                "the user's client did not declare {} elicitation; the broker cannot ask it for {server}",
                declared_name(mode)
            ),
            NotShown::Url(why) => format!("the broker did not relay the URL: {why}"),
            NotShown::UnknownMode => "an elicitation mode the broker does not relay".into(),
        })
    }

    /// The reason, for the user (the tool result their client shows).
    pub(super) fn for_user(&self) -> String {
        match self {
            NotShown::Undeclared(mode) => format!("your client did not declare {} elicitation", declared_name(mode)),
            NotShown::Url(why) => why.to_string(),
            NotShown::UnknownMode => "an elicitation mode the broker does not relay".into(),
        }
    }
}

fn declared_name(mode: &str) -> &str {
    if mode == "url" { "URL" } else { mode }
}

/// A server's question as the user's client is shown it, in either era: the server named in
/// its message, a URL only when [`checked_url`] passes it, and `elicitation_id` in place of the
/// server's own (2025-11-25: an id of the broker's; 2026-07-28: empty, the retry answers it).
/// With the server's own elicitation id, for a URL question.
pub(super) fn shown_question(
    server: &str,
    caller: &Caller,
    params: ElicitRequestParams,
    elicitation_id: String,
) -> Result<(ElicitRequestParams, Option<String>), NotShown> {
    match params {
        ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } => {
            if !caller.form_mode {
                return Err(NotShown::Undeclared("form"));
            }
            let shown = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: form_message(server, &message),
                requested_schema,
            };
            Ok((shown, None))
        }
        ElicitRequestParams::UrlElicitationParams { message, url, elicitation_id: theirs, .. } => {
            if !caller.url_mode {
                return Err(NotShown::Undeclared("url"));
            }
            let checked = checked_url(&url).map_err(NotShown::Url)?;
            let shown = ElicitRequestParams::UrlElicitationParams {
                meta: None,
                message: url_message(server, &message, &checked),
                url,
                elicitation_id,
            };
            Ok((shown, Some(theirs)))
        }
        _ => Err(NotShown::UnknownMode),
    }
}

pub(super) fn refused(text: String) -> ErrorData {
    ErrorData::invalid_params(text, None)
}

impl BrokerServer {
    /// Remembers that this session knows the server's URL elicitation `theirs` as `ours`, for
    /// the server's completion notification ([`Questions::take_link`]).
    pub(super) fn remember_server_link(&self, questions: &Questions, theirs: String, ours: String) {
        let scope = self.scope();
        let ttl = self.state.app.core.config.authorization_ttl;
        questions.remember_link(theirs, ours, scope, ttl);
        // The session must still be there when the server says the page is done.
        if let Some(session) = &scope.session_id {
            self.state.sessions.pending_until(session, self.state.app.core.now() + ttl.as_secs() as i64);
        }
    }

    /// Asks the user's client the server's question on the client's own call stream and
    /// returns the answer for the server.
    pub(crate) async fn relay_question(
        &self,
        entry: &ServerEntry,
        caller: &Caller,
        ctx: &RequestContext<RoleServer>,
        questions: &Questions,
        params: ElicitRequestParams,
    ) -> Result<ElicitResult, ErrorData> {
        let server = entry.row.name.as_str();
        let ours = uuid::Uuid::new_v4().to_string();
        let (ask, theirs) =
            shown_question(server, caller, params, ours.clone()).map_err(|why| why.for_server(server))?;
        let link = theirs.map(|theirs| (theirs, ours));
        if let Some((theirs, ours)) = link {
            self.remember_server_link(questions, theirs, ours);
        }
        let wait = self.state.app.core.config.connect_wait;
        let asked = tokio::select! {
            _ = self.state.app.draining.cancelled() => {
                return Err(ErrorData::internal_error("the broker is stopping", None));
            }
            asked = ctx.peer.create_elicitation_with_timeout(ask, Some(wait)) => asked,
        };
        asked.map_err(|error| match error {
            ServiceError::McpError(error) => error,
            ServiceError::Timeout { .. } => {
                ErrorData::internal_error("the user did not answer in time", Some(json!({"server": server})))
            }
            _ => ErrorData::internal_error("the user's client could not be asked", None),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_and_loopback_http_urls_pass_unchanged_and_others_are_refused() {
        assert!(checked_url("https://vendor.example/login?x=1").is_ok());
        assert!(checked_url("http://127.0.0.1:8080/page").is_ok());
        assert!(checked_url("http://[::1]/page").is_ok());
        assert!(checked_url("http://localhost:3000/").is_ok());
        assert_eq!(checked_url("http://vendor.example/login"), Err(UrlRefused::Scheme));
        assert_eq!(checked_url("http://127.0.0.1.evil.example/"), Err(UrlRefused::Scheme));
        assert_eq!(checked_url("javascript:alert(1)"), Err(UrlRefused::Scheme));
        assert_eq!(checked_url("file:///etc/passwd"), Err(UrlRefused::Scheme));
        assert_eq!(checked_url("https://user:pw@vendor.example/"), Err(UrlRefused::Credentials));
        assert_eq!(checked_url("not a url"), Err(UrlRefused::Unparsable));
    }

    #[test]
    fn a_links_message_names_the_server_and_the_pages_host() {
        let url = checked_url("https://login.vendor.example/start").unwrap();
        let message = url_message("crm", "Sign in to the vendor.", &url);
        assert!(message.starts_with("The server crm (behind this broker)"), "{message}");
        assert!(message.contains("login.vendor.example") && message.contains("not the broker's"), "{message}");
    }
}
