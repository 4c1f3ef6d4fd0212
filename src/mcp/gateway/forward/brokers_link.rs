//! A `token-exchange` server's `-32042`. Such a server is a tool server of the token API: when
//! the user has not connected the provider it asks for, or not allowed its service to use the
//! connection, the exchange answers with the broker's own link, which the server passes on as
//! a URL elicitation (MCP 2025-11-25 client/elicitation §URL mode). That link is the broker's,
//! so the broker shows it as its own, in the client's era, exactly as for a missing grant —
//! but only after checking it is: every elicitation must be `{public_url}/connect/{id}` for a
//! live authorization of the calling user. Anything else stays a server's link, which the
//! broker never passes off as its own ([`super::server_pages`]).
//!
//! A `token-exchange` server that speaks 2026-07-28 ([`crate::mcp::gateway::upstream::revision`]) passes the same link
//! on as an `InputRequiredResult` with URL elicitations instead (SEP-2322); such a round, when
//! it carries only the broker's own links, is taken as that `-32042`
//! ([`brokers_link_in_round`]) rather than relayed as the server's question.

use std::sync::Arc;

use rmcp::model::{ElicitRequestParams, ErrorData, InputRequest, InputRequiredResult};
use serde_json::{Value, json};

use super::credential::Instead;
use super::server_pages::relay_server_link;
use crate::broker::authorizations::connect_url;
use crate::config::ProviderConfig;
use crate::mcp::access::send_to_browser;
use crate::mcp::context::Context;
use crate::mcp::elicitation::URL_ELICITATION_REQUIRED;
use crate::mcp::failure::tool_failed;
use crate::mcp::gateway::catalogue::registry::ServerEntry;
use crate::mcp::gateway::upstream::questions::Questions;
use crate::store::StoreResult;
use crate::store::authorizations::AuthorizationRow;
use crate::store::gateway::GatewayAuth;

/// The answer to a `token-exchange` server's `-32042`, and the call's outcome label.
pub(crate) async fn brokers_link_from_server(
    cx: Context<'_>,
    entry: &ServerEntry,
    error: ErrorData,
    questions: Option<Arc<Questions>>,
) -> (Instead, &'static str) {
    match own_link(cx, &error).await {
        Ok(Some((row, provider))) => {
            cx.remember_elicitation(&row.id);
            let hint = format!("The server {} behind the broker needs it.", entry.row.name);
            (send_to_browser(cx, &provider, &row, Some(&hint)).map(Into::into), "needs_user")
        }
        // The server's own page: relayed as the server's ([`super::server_pages`]).
        Ok(None) => relay_server_link(cx, entry, error, questions.as_ref()),
        Err(error) => (Err(tool_failed(error).into()), "failed"),
    }
}

/// A `token-exchange` server's `InputRequiredResult` that only passes on the broker's own
/// links, as the `-32042` for [`brokers_link_from_server`]; `None` for any other server or
/// round, which is relayed as the server's own ([`super::rounds`]).
pub(crate) async fn brokers_link_in_round(
    cx: Context<'_>,
    entry: &ServerEntry,
    asked: &InputRequiredResult,
) -> Option<ErrorData> {
    if !matches!(entry.row.auth, GatewayAuth::TokenExchange { .. }) {
        return None;
    }
    let error = as_url_elicitation_required(asked)?;
    match own_link(cx, &error).await {
        Ok(None) => None,
        // A store failure is reported where the link is answered.
        Ok(Some(_)) | Err(_) => Some(error),
    }
}

/// A round that asks only to open pages, in the shape of the `-32042` a 2025-11-25 server
/// answers with, so both are checked alike. 2026-07-28 has no elicitationId; the link's last
/// segment stands in for it ([`own_link`] checks the whole link is the broker's for that id).
fn as_url_elicitation_required(asked: &InputRequiredResult) -> Option<ErrorData> {
    let requests = asked.input_requests.as_ref().filter(|requests| !requests.is_empty())?;
    let mut elicitations = Vec::new();
    for request in requests.values() {
        let InputRequest::Elicitation(elicit) = request else { return None };
        let ElicitRequestParams::UrlElicitationParams { message, url, elicitation_id, .. } = &elicit.params else {
            return None;
        };
        let id = match elicitation_id.as_str() {
            "" => url.rsplit('/').next().unwrap_or_default(),
            id => id,
        };
        elicitations.push(json!({"mode": "url", "elicitationId": id, "url": url, "message": message}));
    }
    let data = json!({"elicitations": elicitations});
    Some(ErrorData::new(URL_ELICITATION_REQUIRED, "the server needs the user to open a page", Some(data)))
}

/// The authorization (and its provider) a server's `-32042` names, if the error carries only
/// the broker's own links for live authorizations of the calling user.
async fn own_link(cx: Context<'_>, error: &ErrorData) -> StoreResult<Option<(AuthorizationRow, Arc<ProviderConfig>)>> {
    let elicitations = error.data.as_ref().and_then(|data| data.get("elicitations")).and_then(Value::as_array);
    let Some(elicitations) = elicitations.filter(|list| !list.is_empty()) else { return Ok(None) };
    let now = cx.core.now();
    let mut first = None;
    for elicitation in elicitations {
        let text = |field: &str| elicitation.get(field).and_then(Value::as_str);
        let (Some(id), Some(url)) = (text("elicitationId"), text("url")) else { return Ok(None) };
        if url != connect_url(cx.core, id).as_str() {
            return Ok(None);
        }
        let Some(row) = cx.core.store.authorizations().by_id(id).await? else { return Ok(None) };
        if row.user_id != cx.caller.user.user_id || row.is_expired(now) {
            return Ok(None);
        }
        let Some(provider) = cx.core.providers.find(&row.provider) else { return Ok(None) };
        first.get_or_insert((row, provider));
    }
    Ok(first)
}
