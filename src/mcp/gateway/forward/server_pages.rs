//! A server's own `-32042` (URLElicitationRequiredError, MCP 2025-11-25 client/elicitation
//! §URL mode): the server answers a call with links to pages of its own, which the user must
//! open before calling again. The broker relays them in the client's era, always as the
//! server's pages, never as its own (a `token-exchange` server's `-32042` that carries the
//! broker's own link is the broker's, [`super::brokers_link`]):
//!
//! - **Each URL** must pass [`super::questions::checked_url`]; one that does not ends the call with
//!   an `isError` naming the server (`question_not_relayable`), and no link is shown.
//! - **A 2025-11-25 client** gets `-32042` whose elicitations carry the server's URLs unchanged,
//!   each message naming the server and the page's host ([`super::questions::url_message`]), each
//!   server `elicitationId` replaced by one of the broker's and remembered on the connection, so
//!   the server's later `notifications/elicitation/complete` reaches this session under the
//!   broker's id (as for a nested URL question, [`super::questions`]).
//! - **A 2026-07-28 client** gets an `InputRequiredResult` with the same URL requests and a
//!   state of the broker's that carries nothing of the server's; its retry sends the call
//!   upstream again, as a 2025-11-25 client's retry does.
//! - **A client that did not declare URL mode** gets an `isError` naming the server.

use std::sync::Arc;

use rmcp::model::{ElicitRequest, ElicitRequestParams, ErrorData, InputRequest, InputRequests};
use serde_json::{Value, json};

use super::credential::Instead;
use super::questions::{checked_url, not_relayable, remember_server_link, url_message};
use crate::mcp::context::Context;
use crate::mcp::elicitation::URL_ELICITATION_REQUIRED;
use crate::mcp::gateway::catalogue::registry::ServerEntry;
use crate::mcp::gateway::upstream::questions::Questions;
use crate::mcp::input_required::ServerRound;

/// One page of the server's, checked: its own id, the URL and the message the client sees.
#[derive(Debug)]
struct Page {
    theirs: String,
    url: String,
    message: String,
}

/// The pages a `-32042` names, each URL checked and each message worded as the server's; or why
/// they are not shown.
fn checked_pages(server: &str, error: &ErrorData) -> Result<Vec<Page>, String> {
    let elicitations = error.data.as_ref().and_then(|data| data.get("elicitations")).and_then(Value::as_array);
    let Some(elicitations) = elicitations.filter(|list| !list.is_empty()) else {
        return Err("its answer names no page".into());
    };
    let mut pages = Vec::new();
    for elicitation in elicitations {
        let text = |field: &str| elicitation.get(field).and_then(Value::as_str);
        if text("mode").is_some_and(|mode| mode != "url") {
            return Err("only pages (URL mode) are relayed from a -32042".into());
        }
        let Some(url) = text("url") else { return Err("a page without a URL".into()) };
        let checked = checked_url(url).map_err(|why| why.to_string())?;
        pages.push(Page {
            theirs: text("elicitationId").unwrap_or_default().to_owned(),
            url: url.to_owned(),
            message: url_message(server, text("message").unwrap_or_default(), &checked),
        });
    }
    Ok(pages)
}

/// The server's `-32042`, relayed in the client's era; the call's outcome label.
/// `questions`: the connection's, which matches the server's completion notifications.
pub(crate) fn relay_server_link(
    cx: Context<'_>,
    entry: &ServerEntry,
    error: ErrorData,
    questions: Option<&Arc<Questions>>,
) -> (Instead, &'static str) {
    let server = entry.row.name.as_str();
    let pages = match checked_pages(server, &error) {
        Ok(pages) => pages,
        Err(why) => return (Ok(not_relayable(server, "url", &why).into()), "tool_error"),
    };
    if !cx.caller.url_mode {
        let why = "it asks you to open a page, and your client did not declare URL elicitation";
        return (Ok(not_relayable(server, "url", why).into()), "tool_error");
    }
    if let Some(round) = &cx.caller.round {
        // MCP 2026-07-28: the pages as a round of the broker's; the retry calls again.
        let mut requests = InputRequests::new();
        for (n, page) in pages.into_iter().enumerate() {
            let params = ElicitRequestParams::UrlElicitationParams {
                meta: None,
                message: page.message,
                url: page.url,
                elicitation_id: String::new(),
            };
            requests.insert(format!("page{}", n + 1), InputRequest::Elicitation(ElicitRequest::new(params)));
        }
        let carried = ServerRound { server_id: entry.row.id.clone(), state: None, keys: Vec::new() };
        return (Err(round.ask_for_server(requests, carried).into()), "needs_user");
    }
    let mut elicitations = Vec::new();
    for page in pages {
        let ours = uuid::Uuid::new_v4().to_string();
        if let Some(questions) = questions
            && !page.theirs.is_empty()
        {
            remember_server_link(cx, questions, page.theirs, ours.clone());
        }
        elicitations.push(json!({"mode": "url", "elicitationId": ours, "url": page.url, "message": page.message}));
    }
    let relayed = ErrorData::new(
        URL_ELICITATION_REQUIRED,
        format!("The server {server} (behind this broker) needs you to open a page of its own first."),
        Some(json!({"elicitations": elicitations, "server": server})),
    );
    (Err(relayed.into()), "needs_user")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(elicitations: Value) -> ErrorData {
        ErrorData::new(URL_ELICITATION_REQUIRED, "open it", Some(json!({"elicitations": elicitations})))
    }

    #[test]
    fn a_servers_pages_are_worded_as_its_own_and_unsafe_urls_are_refused() {
        let ok = error(
            json!([{"mode": "url", "elicitationId": "v1", "url": "https://vendor.example/a", "message": "Sign in."}]),
        );
        let pages = checked_pages("crm", &ok).unwrap();
        assert_eq!((pages[0].theirs.as_str(), pages[0].url.as_str()), ("v1", "https://vendor.example/a"));
        assert!(pages[0].message.starts_with("The server crm (behind this broker)"), "{}", pages[0].message);

        let http = error(json!([{"mode": "url", "elicitationId": "v1", "url": "http://vendor.example/a"}]));
        assert!(checked_pages("crm", &http).unwrap_err().contains("only https"));
        assert!(checked_pages("crm", &error(json!([]))).is_err(), "no page");
        assert!(checked_pages("crm", &ErrorData::new(URL_ELICITATION_REQUIRED, "x", None)).is_err(), "no data");
    }
}
