//! A server's own questions reach the user: a server behind the broker sends
//! `elicitation/create` during a forwarded request (a tool call, a `prompts/get`, a
//! `resources/read`); the broker asks the user's client in its place and passes the answer back.
//! Which forwarded request a question belongs to is the connection's
//! ([`crate::mcp::gateway::upstream::questions`]).
//!
//! - **Form mode** (MCP 2025-11-25 client/elicitation §Form mode): a nested `elicitation/create`
//!   on the client's call stream, the message saying which server asks; accept (with its
//!   content), decline and cancel go back as the client gave them.
//! - **URL mode** (§URL mode): only an `https` URL, or `http` to a loopback address, with no
//!   credentials in it, passed unchanged; anything else is refused to the server. The message
//!   names the server and the page's host, never presents the page as the broker's. The
//!   server's `elicitationId` is replaced by one of the broker's, so a server can neither
//!   collide with nor complete an elicitation of the broker's or of another server's; its
//!   `notifications/elicitation/complete` is passed on, under the broker's id, to the session
//!   that was asked.
//! - **A client that did not declare the mode**: the server gets `-32602`, as MCP 2025-11-25
//!   client/elicitation says for a mode the client did not declare.
//! - **2026-07-28 clients** take no requests of the server's mid-call: the question becomes an
//!   `InputRequiredResult` of the broker's while the call waits on this instance
//!   ([`super::in_flight`]).
//! - **What cannot be relayed** ends the call with an `isError` naming the server,
//!   `structuredContent` `{"error": "question_not_relayable", "server", "mode"}`
//!   ([`not_relayable`]).

use std::net::IpAddr;

use rmcp::model::{CallToolResult, ElicitRequestParams, ElicitResult, ErrorData};
use rmcp::service::ServiceError;
use serde_json::json;

use crate::mcp::caller::Caller;
use crate::mcp::context::Context;
use crate::mcp::gateway::catalogue::registry::ServerEntry;
use crate::mcp::gateway::upstream::questions::Questions;
use crate::mcp::results::error_result;

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
pub(crate) enum NotShown {
    /// The client did not declare this elicitation mode (`"form"` or `"url"`).
    Undeclared(&'static str),
    /// The URL is not one a client may be sent.
    Url(UrlRefused),
    /// A mode the broker does not relay.
    UnknownMode,
}

impl NotShown {
    /// The mode asked for, as the refusals name it.
    pub(crate) fn mode(&self) -> &'static str {
        match self {
            NotShown::Undeclared(mode) => mode,
            NotShown::Url(_) => "url",
            NotShown::UnknownMode => "unknown",
        }
    }

    /// The reason, for the server (the error it reads as the answer to its question).
    pub(crate) fn for_server(&self, server: &str) -> ErrorData {
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
    pub(crate) fn for_user(&self) -> String {
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
pub(crate) fn shown_question(
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

pub(crate) fn refused(text: String) -> ErrorData {
    ErrorData::invalid_params(text, None)
}

/// The `isError` for a question of `server`'s that cannot reach the user.
pub(crate) fn not_relayable(server: &str, mode: &str, why: &str) -> CallToolResult {
    let mut result = error_result(format!("The server {server} asked for input that the broker cannot relay: {why}"));
    result.structured_content = Some(json!({"error": "question_not_relayable", "server": server, "mode": mode}));
    result
}

/// Remembers that the session of `cx` knows the server's URL elicitation `theirs` as `ours`,
/// for the server's completion notification ([`Questions::take_link`]).
pub(crate) fn remember_server_link(cx: Context<'_>, questions: &Questions, theirs: String, ours: String) {
    let ttl = cx.core.config.authorization_ttl;
    questions.remember_link(theirs, ours, cx.session, ttl);
    // The session must still be there when the server says the page is done.
    if let Some(session) = &cx.session.session_id {
        cx.sessions.pending_until(session, cx.core.now() + ttl.as_secs() as i64);
    }
}

/// Asks the user's client the server's question on the client's own call stream and returns
/// the answer for the server.
pub(crate) async fn relay_question(
    cx: Context<'_>,
    entry: &ServerEntry,
    questions: &Questions,
    params: ElicitRequestParams,
) -> Result<ElicitResult, ErrorData> {
    let server = entry.row.name.as_str();
    let ours = uuid::Uuid::new_v4().to_string();
    let (ask, theirs) =
        shown_question(server, cx.caller, params, ours.clone()).map_err(|why| why.for_server(server))?;
    if let Some(theirs) = theirs {
        remember_server_link(cx, questions, theirs, ours);
    }
    let wait = cx.core.config.connect_wait;
    let asked = tokio::select! {
        _ = cx.app.draining.cancelled() => {
            return Err(ErrorData::internal_error("the broker is stopping", None));
        }
        asked = cx.request.peer.create_elicitation_with_timeout(ask, Some(wait)) => asked,
    };
    asked.map_err(|error| match error {
        ServiceError::McpError(error) => error,
        ServiceError::Timeout { .. } => {
            ErrorData::internal_error("the user did not answer in time", Some(json!({"server": server})))
        }
        _ => ErrorData::internal_error("the user's client could not be asked", None),
    })
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
