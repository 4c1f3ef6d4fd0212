//! How a tool asks the user a question in a form (which account, which scopes, confirm), in
//! either revision: a nested `elicitation/create` on the call's own stream (2025-11-25,
//! [`forms::ask`]), or an `InputRequiredResult` and the client's retry (2026-07-28,
//! [`crate::mcp::input_required`]). Callers check [`Caller::form_mode`] first and take their
//! non-form path without it. The browser link of an authorization is asked for by
//! [`crate::mcp::access::send_to_browser`].
//!
//! [`Caller::form_mode`]: crate::mcp::caller::Caller::form_mode

use serde_json::json;

use crate::config::ProviderConfig;
use crate::mcp::context::Context;
use crate::mcp::forms::{self, AskError, FormSchema, Reply};
use crate::mcp::input_required::QUESTION;
use crate::mcp::logging::LogLevel;

/// Asks `form` with `message` and returns the user's reply.
pub(crate) async fn ask_form(cx: Context<'_>, message: String, form: &FormSchema) -> Result<Reply, AskError> {
    let Some(round) = &cx.caller.round else {
        return tokio::select! {
            // A stop does not wait for the user's answer: nothing was done yet.
            _ = cx.app.draining.cancelled() => Err(AskError::Stopping),
            reply = forms::ask(&cx.request.peer, &cx.request.ct, message, form, cx.core.config.connect_wait) => reply,
        };
    };
    let ask = |message: String| round.ask_form(QUESTION, message, form).map(|r| AskError::InputRequired(Box::new(r)));
    match round.reply(QUESTION, form) {
        Some(Ok(reply)) => Ok(reply),
        // Asked again, with the reason: the user can fix it in the same call.
        Some(Err(invalid)) => Err(ask(format!("Your answer could not be used: {invalid}. {message}"))?),
        None => Err(ask(message)?),
    }
}

/// MCP utilities/logging: how a question ended (never the answer's values).
pub(crate) async fn log_reply(
    cx: Context<'_>,
    tool: &str,
    provider: &ProviderConfig,
    reply: &Result<Reply, forms::AskError>,
) {
    let outcome = match reply {
        Ok(Reply::Accepted(_)) => "accepted".to_owned(),
        Ok(Reply::Declined) => "declined".to_owned(),
        Ok(Reply::Cancelled) => "cancelled".to_owned(),
        Err(forms::AskError::InputRequired(_)) => "asked".to_owned(),
        Err(error) => error.to_string(),
    };
    let asked = matches!(reply, Err(forms::AskError::InputRequired(_)));
    let level = if reply.is_ok() || asked { LogLevel::Info } else { LogLevel::Warning };
    cx.log(level, json!({"tool": tool, "provider": provider.id.as_str(), "form": outcome})).await;
}
