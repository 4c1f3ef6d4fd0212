//! Which protocol revision a request speaks, for the few places where the answer differs:
//! 2025-11-25 and older are sessions (`initialize`, server→client requests, `logging/setLevel`);
//! 2026-07-28 is stateless (everything the server needs is in each request's `_meta`).

use rmcp::RoleServer;
use rmcp::model::ProtocolVersion;
use rmcp::service::RequestContext;

/// Whether the request of `ctx` speaks 2026-07-28 or later: its own `_meta` names the version,
/// or else the session negotiated it.
pub fn is_stateless(ctx: &RequestContext<RoleServer>) -> bool {
    // ISO dates compare as strings in calendar order.
    ctx.protocol_version().is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}
