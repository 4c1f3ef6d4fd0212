//! The access decisions the MCP face shares — the broker's tools, the servers behind the
//! broker and the extension API: the core's answer ([`crate::broker::access`]) for this caller,
//! translated into what a tool answers in the client's era.
//!
//! A token is handed out only when the user is connected with the scopes asked for, the token is
//! fresh (refreshed if due) and the user allowed this client to use the connection (MCP security
//! best practices §Confused deputy). Otherwise the answer sends the user to the broker's own
//! page: `-32042` carrying the link (2025-11-25; the client opens it and calls again), an
//! `InputRequiredResult` whose retry waits for the browser (2026-07-28), or the link as text for
//! a client without URL mode. Every link this request hands out is remembered for the session's
//! completion notification.

use rmcp::model::{CallToolResult, ErrorData};

use super::context::Context;
use super::elicitation::{ask_message, manual_connect_text, url_elicitation_required};
use super::failure::{provider_unavailable, tool_failed};
use super::results::{Unfinished, error_result};
use crate::broker::access::{self, Access, Standing};
use crate::broker::authorizations::{self, Ask, Requester};
use crate::broker::tokens::AccessToken;
use crate::config::ProviderConfig;
use crate::domain::Scopes;
use crate::store::authorizations::AuthorizationRow;

/// What a tool answers instead of acting, when it cannot have the token yet.
pub type NotYet = Result<CallToolResult, Unfinished>;

/// Where this client stands with (user, provider, account) and `required` scopes (`account`
/// `None`: the most recently updated one): the core's answer.
pub async fn standing(
    cx: Context<'_>,
    provider: &ProviderConfig,
    account: Option<&str>,
    required: &Scopes,
) -> Result<Standing, ErrorData> {
    let user = &cx.caller.user;
    access::standing(cx.core, &user.user_id, &user.client, provider, account, required, None).await.map_err(tool_failed)
}

/// A token for (provider, account) with `required` scopes that this client may use, or what to
/// answer instead (see the module doc).
pub async fn token_for_tool(
    cx: Context<'_>,
    provider: &ProviderConfig,
    account: Option<&str>,
    required: &Scopes,
) -> Result<AccessToken, NotYet> {
    token_for_requester(cx, &cx.caller.requester(), provider, account, required, None).await
}

/// [`token_for_tool`] asking as `who` (a server's call carries the server whose pair the link
/// approves too), with `hint` said beside the link.
pub async fn token_for_requester(
    cx: Context<'_>,
    who: &Requester<'_>,
    provider: &ProviderConfig,
    account: Option<&str>,
    required: &Scopes,
    hint: Option<&str>,
) -> Result<AccessToken, NotYet> {
    let answer = access::access(cx.core, who, provider, account, required).await;
    let row = match answer.map_err(|e| Err(tool_failed(e).into()))? {
        Access::Ready(token) => return Ok(*token),
        Access::Unavailable { retry_after } => return Err(Ok(provider_unavailable(provider, retry_after))),
        Access::Refused(why) => return Err(Ok(error_result(format!("{} refused: {why}", provider.display_name)))),
        Access::Connect { authorization, .. }
        | Access::MoreScopes { authorization, .. }
        | Access::AllowClient { authorization } => authorization,
    };
    cx.remember_elicitation(&row.id);
    Err(send_to_browser(cx, provider, &row, hint))
}

/// An open authorization for this request, remembered for the completion notification.
pub async fn authorization(
    cx: Context<'_>,
    provider: &ProviderConfig,
    scopes: &Scopes,
    ask: Ask<'_>,
) -> Result<AuthorizationRow, ErrorData> {
    let row =
        authorizations::open(cx.core, &cx.caller.requester(), provider, scopes, ask).await.map_err(tool_failed)?;
    cx.remember_elicitation(&row.id);
    Ok(row)
}

/// The answer to a request that needs the user at the page of `row` first, in the client's era
/// (see the module doc), with `hint` said beside the link.
pub fn send_to_browser(
    cx: Context<'_>,
    provider: &ProviderConfig,
    row: &AuthorizationRow,
    hint: Option<&str>,
) -> NotYet {
    let with_hint = |text: String| match hint {
        Some(hint) => format!("{text} {hint}"),
        None => text,
    };
    if !cx.caller.url_mode {
        return Ok(error_result(with_hint(manual_connect_text(cx.app, row, provider, &row.scopes))));
    }
    match &cx.caller.round {
        Some(round) => {
            let url = authorizations::connect_url(cx.core, &row.id).to_string();
            let message = with_hint(ask_message(row, provider, &row.scopes));
            Err(round.ask_to_open(&row.id, message, url).into())
        }
        None => Err(url_elicitation_required(cx.app, row, provider, &row.scopes).into()),
    }
}
