//! `disconnect_account`: the broker revokes the tokens of one of the user's accounts at a
//! provider there and forgets them.
//!
//! MCP 2025-11-25 client/elicitation §Form mode: with form mode the user confirms (and picks
//! the account when they have several and named none) in one form. Without it the tool is
//! annotated destructive (`destructiveHint`), so the client asks before calling it, and several
//! accounts without a name get an `isError` listing them.

use rmcp::model::{CallToolResult, ErrorData};
use serde::Deserialize;

use super::accounts::{find_account, several_accounts, unknown_account};
use super::asking::{ask_form, log_reply};
use super::catalogue::{DISCONNECT_ACCOUNT, unknown_provider};
use crate::broker::connections;
use crate::broker::consent;
use crate::broker::tokens::{Disconnected, Revocation, disconnect_grant};
use crate::config::ProviderConfig;
use crate::mcp::context::Context;
use crate::mcp::failure::tool_failed;
use crate::mcp::forms::questions::{self, AccountQuestion, CONFIRM, Picked};
use crate::mcp::forms::{self, FormSchema, Reply};
use crate::mcp::results::{Unfinished, error_result, text_result};
use crate::store::grants::GrantRow;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DisconnectAccount {
    pub provider: String,
    #[serde(default)]
    pub account: Option<String>,
}

impl DisconnectAccount {
    pub async fn run(self, cx: Context<'_>) -> Result<CallToolResult, Unfinished> {
        let Some(provider) = cx.core.providers.find(&self.provider) else {
            return Ok(error_result(unknown_provider(&cx.core.providers.ids(), &self.provider)));
        };
        let grants = connections::accounts(cx.core, &cx.caller.user.user_id, &provider).await.map_err(tool_failed)?;
        if grants.is_empty() {
            return Ok(text_result(format!("You were not connected to {}.", provider.display_name)));
        }
        let named = match self.account.as_deref() {
            Some(name) => match find_account(&grants, name) {
                Some(i) => Some(i),
                None => return Ok(unknown_account(&provider, name, &grants, DISCONNECT_ACCOUNT)),
            },
            None if grants.len() == 1 => Some(0),
            None => None,
        };
        // Checked before any question: a client that may not use the connection may not end it.
        if let Some(i) = named
            && let Some(refusal) = not_allowed_to_disconnect(cx, &provider, &grants[i]).await?
        {
            return Ok(refusal);
        }
        if !cx.caller.form_mode {
            // No form mode: the tool is annotated destructive (destructiveHint), so the client
            // asks the user before calling it; asking again would need a form we cannot send.
            return match named {
                Some(i) => Ok(revoke(cx, &provider, &grants[i]).await?),
                None => Ok(several_accounts(&provider, &grants, DISCONNECT_ACCOUNT)),
            };
        }
        // One form: which account (when several and none named) and a ticked confirmation.
        let question = named.is_none().then(|| AccountQuestion::new(&grants, false, None, &provider));
        let mut fields: Vec<forms::Field> = question.iter().map(|q| q.field.clone()).collect();
        fields.push(questions::confirm_field());
        let form = FormSchema::new(fields).map_err(tool_failed)?;
        let message = match named {
            Some(i) => format!(
                "Disconnect your {} account {}? The broker revokes its access there and forgets it.",
                provider.display_name,
                questions::account_shown(&grants[i])
            ),
            None => format!(
                "Which {} account should be disconnected? The broker revokes its access there and forgets it.",
                provider.display_name
            ),
        };
        let nothing = "Nothing was disconnected.";
        let reply = ask_form(cx, message, &form).await;
        log_reply(cx, DISCONNECT_ACCOUNT, &provider, &reply).await;
        let answers = match reply {
            Ok(Reply::Accepted(answers)) => answers,
            Ok(Reply::Declined) => return Ok(error_result(format!("You declined. {nothing}"))),
            Ok(Reply::Cancelled) => return Ok(error_result(format!("Cancelled. {nothing}"))),
            Err(error) => return questions::no_answer(error, nothing),
        };
        // Accepting is the confirmation; only an unticked box says no.
        if answers.bool(CONFIRM) == Some(false) {
            return Ok(error_result(format!("You did not confirm. {nothing}")));
        }
        let chosen = match (named, question.as_ref().and_then(|q| q.picked(&answers))) {
            (Some(i), _) | (None, Some(Picked::Existing(i))) => i,
            _ => return Ok(error_result(format!("No account was chosen. {nothing}"))),
        };
        Ok(revoke(cx, &provider, &grants[chosen]).await?)
    }
}

/// MCP security best practices §Confused deputy: disconnecting revokes the tokens at the
/// provider, which is a use of them; a client the user has not allowed to use this connection
/// gets a refusal naming the page where the user can do it.
async fn not_allowed_to_disconnect(
    cx: Context<'_>,
    provider: &ProviderConfig,
    grant: &GrantRow,
) -> Result<Option<CallToolResult>, ErrorData> {
    if consent::client_may_use(cx.core, &cx.caller.user.client, grant).await.map_err(tool_failed)? {
        return Ok(None);
    }
    Ok(Some(error_result(format!(
        "This client is not allowed to use your {} connection{}, so it cannot disconnect it. You can disconnect it yourself at {}. Nothing was disconnected.",
        provider.display_name,
        grant.account_label.as_ref().map(|a| format!(" “{a}”")).unwrap_or_default(),
        cx.core.config.url("/connections"),
    ))))
}

async fn revoke(cx: Context<'_>, provider: &ProviderConfig, grant: &GrantRow) -> Result<CallToolResult, ErrorData> {
    if let Some(refusal) = not_allowed_to_disconnect(cx, provider, grant).await? {
        return Ok(refusal);
    }
    let account = grant.account_label.as_ref().map(|a| format!(" account “{a}”")).unwrap_or_default();
    let name = &provider.display_name;
    match disconnect_grant(cx.core, provider, grant).await {
        Ok(Disconnected { deleted: false, .. }) => {
            Ok(text_result(format!("Your {name}{account} was already disconnected.")))
        }
        Ok(Disconnected { revocation, .. }) => Ok(text_result(match revocation {
            Revocation::Revoked => {
                format!("Disconnected your {name}{account}; its tokens were revoked and deleted.")
            }
            Revocation::NotOffered => format!(
                "Disconnected your {name}{account}; its tokens were deleted here ({name} offers no revocation, so revoke the app's access in your {name} settings if you want it gone there too)."
            ),
            Revocation::Failed => format!(
                "Disconnected your {name}{account}; its tokens were deleted here, but {name} did not confirm the revocation: revoke the app's access in your {name} settings to be sure."
            ),
            Revocation::TokenUnreadable => format!(
                "Disconnected your {name}{account}; its stored tokens could not be read, so nothing could be sent to {name}: revoke the app's access in your {name} settings to be sure."
            ),
        })),
        Err(e) => Err(tool_failed(e)),
    }
}
