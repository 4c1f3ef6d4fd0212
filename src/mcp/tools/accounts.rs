//! Which of a user's several accounts at one provider a tool acts on (shared by
//! `connect_account`, `disconnect_account` and `provider_request`).
//!
//! A tool that names no `account` while the user has several at that provider asks which one
//! with a titled single-select form when the client declared form mode; other clients get an
//! `isError` result listing the accounts and asking for `account`.

use rmcp::model::CallToolResult;

use super::asking::{ask_form, log_reply};
use super::catalogue::CONNECT_ACCOUNT;
use crate::broker::connections;
use crate::config::ProviderConfig;
use crate::mcp::context::Context;
use crate::mcp::failure::tool_failed;
use crate::mcp::forms::questions::{self, AccountQuestion, Picked};
use crate::mcp::forms::{FormSchema, Reply};
use crate::mcp::results::{Unfinished, error_result};
use crate::store::grants::GrantRow;

/// Which of the user's accounts at a provider a tool acts on.
pub(crate) enum AccountPick {
    /// This one.
    One(Box<GrantRow>),
    /// The user has no account there.
    NoAccount,
    /// A result to return as is: an unknown name, no choice made, several without form mode.
    Answer(CallToolResult),
}

/// The account a tool that uses an existing account acts on: the one named, the only one, or —
/// with several and none named — the user's choice (form mode) or an `isError` asking for
/// `account`.
pub(crate) async fn pick_account(
    cx: Context<'_>,
    provider: &ProviderConfig,
    named: Option<&str>,
    tool: &str,
) -> Result<AccountPick, Unfinished> {
    let user = &cx.caller.user;
    let mut grants =
        connections::accounts_seen_by(cx.core, &user.user_id, provider, &user.client).await.map_err(tool_failed)?;
    if grants.is_empty() {
        return Ok(AccountPick::NoAccount);
    }
    if let Some(name) = named {
        return Ok(match find_account(&grants, name) {
            Some(i) => AccountPick::One(Box::new(grants.swap_remove(i))),
            None => AccountPick::Answer(unknown_account(provider, name, &grants, tool)),
        });
    }
    if grants.len() == 1 {
        return Ok(AccountPick::One(Box::new(grants.swap_remove(0))));
    }
    if !cx.caller.form_mode {
        return Ok(AccountPick::Answer(several_accounts(provider, &grants, tool)));
    }
    let question = AccountQuestion::new(&grants, false, questions::most_recent(&grants), provider);
    let form = FormSchema::new([question.field.clone()]).map_err(tool_failed)?;
    let message = format!("You have several {} accounts. Which one should be used?", provider.display_name);
    let nothing = "Nothing was sent to the provider.";
    let reply = ask_form(cx, message, &form).await;
    log_reply(cx, tool, provider, &reply).await;
    Ok(match reply {
        Ok(Reply::Accepted(answers)) => match question.picked(&answers) {
            Some(Picked::Existing(i)) => AccountPick::One(Box::new(grants.swap_remove(i))),
            _ => AccountPick::Answer(error_result(format!("No account was chosen. {nothing}"))),
        },
        Ok(Reply::Declined) => {
            AccountPick::Answer(error_result(format!("You declined to choose an account. {nothing}")))
        }
        Ok(Reply::Cancelled) => AccountPick::Answer(error_result(format!("Cancelled. {nothing}"))),
        Err(error) => AccountPick::Answer(questions::no_answer(error, nothing)?),
    })
}

/// The index of the account `name` ('' = the account without a name).
pub(crate) fn find_account(grants: &[GrantRow], name: &str) -> Option<usize> {
    grants.iter().position(|g| questions::account_name(g) == name)
}

pub(crate) fn unknown_account(
    provider: &ProviderConfig,
    name: &str,
    grants: &[GrantRow],
    tool: &str,
) -> CallToolResult {
    let shown: String = name.chars().take(64).collect();
    error_result(format!(
        "You have no {} account named {shown:?}. Your accounts there: {}. Call {tool} again with one of them as `account`.",
        provider.display_name,
        questions::list_accounts(grants)
    ))
}

pub(crate) fn several_accounts(provider: &ProviderConfig, grants: &[GrantRow], tool: &str) -> CallToolResult {
    let or_new = if tool == CONNECT_ACCOUNT { " (or a new name, to add another account)" } else { "" };
    error_result(format!(
        "You have several {} accounts: {}. Call {tool} again with `account` set to the one to use{or_new}.",
        provider.display_name,
        questions::list_accounts(grants)
    ))
}
