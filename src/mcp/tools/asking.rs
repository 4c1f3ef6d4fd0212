//! How a tool asks the user something, in either revision: a form (which account, which
//! scopes, confirm) and the browser link of an authorization.
//!
//! - 2025-11-25: a nested `elicitation/create` on the call's own stream ([`forms::ask`],
//!   `connect::start_connect`), or `-32042` carrying the link for tools other than
//!   `connect_account`.
//! - 2026-07-28: an `InputRequiredResult` and the client's retry ([`crate::mcp::input_required`]).
//!
//! Clients that declared no such mode get the link as text in an `isError` result, or a default.

use rmcp::RoleServer;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;

use crate::broker::authorizations;
use crate::config::ProviderConfig;
use crate::mcp::elicitation;
use crate::mcp::forms::{self, AskError, FormSchema, Reply};
use crate::mcp::handler::{BrokerServer, Caller};
use crate::mcp::input_required::QUESTION;
use crate::mcp::results::{Unfinished, error_result};
use crate::store::authorizations::AuthorizationRow;

impl BrokerServer {
    /// Asks `form` with `message` and returns the user's reply. Callers check
    /// [`Caller::form_mode`] first and take their non-form path without it.
    pub(crate) async fn ask_form(
        &self,
        caller: &Caller,
        ctx: &RequestContext<RoleServer>,
        message: String,
        form: &FormSchema,
    ) -> Result<Reply, AskError> {
        let Some(round) = &caller.round else {
            return tokio::select! {
                // A stop does not wait for the user's answer: nothing was done yet.
                _ = self.state.app.draining.cancelled() => Err(AskError::Stopping),
                reply = forms::ask(&ctx.peer, &ctx.ct, message, form, self.state.app.core.config.connect_wait) => reply,
            };
        };
        let ask =
            |message: String| round.ask_form(QUESTION, message, form).map(|r| AskError::InputRequired(Box::new(r)));
        match round.reply(QUESTION, form) {
            Some(Ok(reply)) => Ok(reply),
            // Asked again, with the reason: the user can fix it in the same call.
            Some(Err(invalid)) => Err(ask(format!("Your answer could not be used: {invalid}. {message}"))?),
            None => Err(ask(message)?),
        }
    }

    /// The answer to a tool that needs the user at the page of `row` first: in 2025-11-25
    /// `-32042` carrying the link (the client opens it and calls again); in 2026-07-28 an
    /// `InputRequiredResult` whose retry waits for the browser; without URL mode, the link as
    /// text.
    pub(crate) fn send_to_browser(
        &self,
        caller: &Caller,
        provider: &ProviderConfig,
        row: &AuthorizationRow,
        hint: Option<&str>,
    ) -> Result<CallToolResult, Unfinished> {
        let with_hint = |text: String| match hint {
            Some(hint) => format!("{text} {hint}"),
            None => text,
        };
        if !caller.url_mode {
            return Ok(error_result(with_hint(elicitation::manual_connect_text(
                &self.state.app,
                row,
                provider,
                &row.scopes,
            ))));
        }
        match &caller.round {
            Some(round) => {
                let url = authorizations::connect_url(&self.state.app.core, &row.id).to_string();
                let message = with_hint(elicitation::ask_message(row, provider, &row.scopes));
                Err(round.ask_to_open(&row.id, message, url).into())
            }
            None => Err(elicitation::url_elicitation_required(&self.state.app, row, provider, &row.scopes).into()),
        }
    }
}
