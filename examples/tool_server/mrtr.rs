//! How a 2026-07-28 client is asked for the user (MCP 2026-07-28, multi round-trip requests):
//! instead of `-32042` and a completion notification, an `InputRequiredResult` with one URL-mode
//! `elicitation/create` (the broker's link) and a sealed `requestState`; the client fulfils it and
//! sends the same `tools/call` again with `inputResponses` and the state echoed.

use std::collections::BTreeMap;

use rmcp::RoleServer;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, InputRequest, InputRequiredResult,
    InputResponses, ProtocolVersion,
};
use rmcp::service::RequestContext;

use super::broker::PendingAuthorization;

/// Our key in `inputRequests` / `inputResponses`.
pub const INPUT_KEY: &str = "authorize";

/// True when the request speaks 2026-07-28 (or later): no sessions, no `-32042`.
pub fn is_stateless(ctx: &RequestContext<RoleServer>) -> bool {
    // ISO dates compare as strings in time order.
    ctx.protocol_version().is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// True when the client declared URL-mode elicitation (`elicitation: {url: {}}`).
pub fn opens_urls(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities().and_then(|c| c.elicitation).is_some_and(|e| e.url.is_some())
}

/// The first answer: open the broker's page (`message` says what for), then retry with `state`.
pub fn ask(authorization: &PendingAuthorization, message: String, state: String) -> InputRequiredResult {
    // 2026-07-28 has no elicitationId: `requestState` is what ties the retry to this request.
    let open = ElicitRequest::new(ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message,
        url: authorization.url.to_string(),
        elicitation_id: String::new(),
    });
    let requests = BTreeMap::from([(INPUT_KEY.to_owned(), InputRequest::Elicitation(open))]);
    InputRequiredResult::new(Some(requests), Some(state))
}

/// A retry found the user not finished yet: the same state again and no second link (the
/// client already has it), so the client simply retries.
pub fn still_waiting(state: &str) -> InputRequiredResult {
    InputRequiredResult::from_request_state(state)
}

/// What the user said to our URL request, if the client sent an answer this round (a round
/// that only echoed the state has none). `accept` only means they agreed to open the page.
pub fn answer(responses: Option<&InputResponses>) -> Option<ElicitationAction> {
    let response = responses?.get(INPUT_KEY)?;
    serde_json::from_value::<ElicitResult>(response.clone()).ok().map(|result| result.action)
}
