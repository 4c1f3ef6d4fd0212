//! Who calls ([`Caller`]): what every tool, prompt, resource and forwarded request needs to
//! know about the request it serves, read once from the request.
//!
//! Each request's user comes from the verified bearer token that the HTTP layer put in the
//! request's extensions — never from the session. What the client declared it can do comes
//! from the session's `initialize` (2025-11-25) or from the request's own `_meta`
//! (2026-07-28).

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::ErrorData;
use rmcp::service::RequestContext;

use super::forms::form_mode;
use super::input_required::Round;
use super::revision::is_stateless;
use super::session::owner::SESSION_HEADER;
use crate::broker::authorizations::Requester;
use crate::identity::AuthenticatedUser;

/// What the broker knows about the caller of one request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user: AuthenticatedUser,
    pub session_id: Option<String>,
    pub client_name: Option<String>,
    /// The client declared `elicitation.url` (never send a mode it did not declare).
    pub url_mode: bool,
    /// The client declared form-mode elicitation (or an empty `elicitation: {}`).
    pub form_mode: bool,
    /// The request's revision asks the user by round trips (2026-07-28: `InputRequiredResult`
    /// and a retry) rather than by requests of the server's own (2025-11-25).
    pub round_trips: bool,
    /// For a 2026-07-28 request: what its state carried and how to ask the next question.
    pub(crate) round: Option<Arc<Round>>,
}

impl Caller {
    /// The caller of the request of `ctx`.
    pub fn of(ctx: &RequestContext<RoleServer>) -> Result<Self, ErrorData> {
        let parts = ctx.extensions.get::<http::request::Parts>();
        let user = parts
            .and_then(|p| p.extensions.get::<AuthenticatedUser>())
            .cloned()
            .ok_or_else(|| ErrorData::internal_error("request reached the MCP handler without authentication", None))?;
        let session_id =
            parts.and_then(|p| p.headers.get(SESSION_HEADER)).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let info = ctx.peer.peer_info();
        let client_name =
            info.as_ref().map(|i| i.client_info.title.clone().unwrap_or_else(|| i.client_info.name.clone()));
        // Sessions declare capabilities at initialize; stateless (2026-07-28) requests carry
        // them in `_meta`.
        let declared = ctx.meta.client_capabilities().and_then(|c| c.elicitation);
        let url_mode = ctx.peer.supported_elicitation_modes().contains(&rmcp::service::ElicitationMode::Url)
            || declared.as_ref().is_some_and(|e| e.url.is_some());
        let round_trips = is_stateless(ctx);
        let form_mode = if round_trips {
            // An empty `elicitation: {}` means form mode (client/elicitation §Capabilities).
            declared.as_ref().is_some_and(|e| e.form.is_some() || e.url.is_none())
        } else {
            form_mode(&ctx.peer)
        };
        Ok(Caller { user, session_id, client_name, url_mode, form_mode, round_trips, round: None })
    }

    /// The same caller, with the round its 2026-07-28 request opened.
    pub(crate) fn with_round(&self, round: Round) -> Self {
        Caller { round: Some(Arc::new(round)), ..self.clone() }
    }

    /// Who asks, for the core.
    pub(crate) fn requester(&self) -> Requester<'_> {
        Requester {
            user_id: &self.user.user_id,
            client: &self.user.client,
            client_name: self.client_name.as_deref(),
            mcp_session: self.session_id.as_deref(),
            server: None,
            organization: None,
        }
    }
}
