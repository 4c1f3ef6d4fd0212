//! `list_connections` and `disconnect_account`, and choosing among a user's several accounts
//! at one provider (shared with `connect_account` and `provider_request`).
//!
//! A tool that names no `account` while the user has several at that provider asks which one
//! with a titled single-select form when the client declared form mode; other clients get an
//! `isError` result listing the accounts and asking for `account`.

use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ErrorData};
use rmcp::service::RequestContext;
use serde_json::json;

use crate::broker::connections::{self, ConnectionStatus};
use crate::broker::consent;
use crate::broker::tokens::{Disconnected, Revocation};
use crate::config::ProviderConfig;
use crate::mcp::forms::questions::{self, AccountQuestion, CONFIRM, Picked};
use crate::mcp::forms::{self, FormSchema, Reply};
use crate::mcp::handler::{BrokerServer, Caller};
use crate::mcp::logging::LogLevel;
use crate::mcp::results::{Unfinished, error_result, text_result};
use crate::mcp::tools::failure::tool_failed;
use crate::mcp::tools::{CONNECT_ACCOUNT, DisconnectArgs, unknown_provider};
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

impl BrokerServer {
    pub(crate) async fn list_connections(&self, caller: &Caller) -> Result<CallToolResult, ErrorData> {
        let listing = connections::connections(&self.state.app.core, &caller.user.user_id, Some(&caller.user.client))
            .await
            .map_err(tool_failed)?;
        // Providers no longer configured are not offered to tools.
        let entries: Vec<_> = listing
            .iter()
            .filter_map(|c| {
                let provider = c.provider.as_deref()?;
                let grant = c.grant.as_ref();
                Some(json!({
                    "provider": provider.id.as_str(),
                    "display_name": provider.display_name,
                    "connected": c.status == ConnectionStatus::Connected,
                    "status": c.status.as_str(),
                    "account": grant.and_then(|g| g.account_label.clone()),
                    "scopes": grant.map(|g| g.scopes.iter().collect::<Vec<_>>()).unwrap_or_default(),
                    "expires_at": grant.and_then(|g| g.expires_at),
                    "allowed_for_this_client": c.allowed_for_client,
                    "state": c.state.code(),
                    "last_refresh_error": c.state.last_error().map(|e| e.as_str()),
                    "next_refresh_at": c.state.retry_at(),
                }))
            })
            .collect();
        // `structured` also puts the same JSON in a text block, for clients that only show
        // content (MCP server/tools §structured content).
        Ok(CallToolResult::structured(json!({ "connections": entries })))
    }

    // MCP 2025-11-25 client/elicitation §Form mode: confirming a destructive action.
    pub(crate) async fn disconnect_account_in(
        &self,
        caller: &Caller,
        args: DisconnectArgs,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, Unfinished> {
        self.disconnect(caller, args, Some(ctx)).await
    }

    async fn disconnect(
        &self,
        caller: &Caller,
        args: DisconnectArgs,
        ctx: Option<&RequestContext<RoleServer>>,
    ) -> Result<CallToolResult, Unfinished> {
        let Some(provider) = self.state.app.core.providers.find(&args.provider) else {
            return Ok(error_result(unknown_provider(&self.state.app.core.providers.ids(), &args.provider)));
        };
        let grants =
            connections::accounts(&self.state.app.core, &caller.user.user_id, &provider).await.map_err(tool_failed)?;
        if grants.is_empty() {
            return Ok(text_result(format!("You were not connected to {}.", provider.display_name)));
        }
        let named = match args.account.as_deref() {
            Some(name) => match find_account(&grants, name) {
                Some(i) => Some(i),
                None => return Ok(unknown_account(&provider, name, &grants, "disconnect_account")),
            },
            None if grants.len() == 1 => Some(0),
            None => None,
        };
        // Checked before any question: a client that may not use the connection may not end it.
        if let Some(i) = named
            && let Some(refusal) = self.not_allowed_to_disconnect(caller, &provider, &grants[i]).await?
        {
            return Ok(refusal);
        }
        let form_ctx = ctx.filter(|_| caller.form_mode);
        let Some(ctx) = form_ctx else {
            // No form mode: the tool is annotated destructive (destructiveHint), so the client
            // asks the user before calling it; asking again would need a form we cannot send.
            return match named {
                Some(i) => Ok(self.revoke(caller, &provider, &grants[i]).await?),
                None => Ok(several_accounts(&provider, &grants, "disconnect_account")),
            };
        };
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
        let reply = self.ask_form(caller, ctx, message, &form).await;
        self.log_reply(ctx, "disconnect_account", &provider, &reply).await;
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
        Ok(self.revoke(caller, &provider, &grants[chosen]).await?)
    }

    /// MCP security best practices §Confused deputy: disconnecting revokes the tokens at the
    /// provider, which is a use of them; a client the user has not allowed to use this
    /// connection gets a refusal naming the page where the user can do it.
    async fn not_allowed_to_disconnect(
        &self,
        caller: &Caller,
        provider: &ProviderConfig,
        grant: &GrantRow,
    ) -> Result<Option<CallToolResult>, ErrorData> {
        if consent::client_may_use(&self.state.app.core, &caller.user.client, grant).await.map_err(tool_failed)? {
            return Ok(None);
        }
        Ok(Some(error_result(format!(
            "This client is not allowed to use your {} connection{}, so it cannot disconnect it. You can disconnect it yourself at {}. Nothing was disconnected.",
            provider.display_name,
            grant.account_label.as_ref().map(|a| format!(" “{a}”")).unwrap_or_default(),
            self.state.app.core.config.url("/connections"),
        ))))
    }

    async fn revoke(
        &self,
        caller: &Caller,
        provider: &ProviderConfig,
        grant: &GrantRow,
    ) -> Result<CallToolResult, ErrorData> {
        if let Some(refusal) = self.not_allowed_to_disconnect(caller, provider, grant).await? {
            return Ok(refusal);
        }
        let account = grant.account_label.as_ref().map(|a| format!(" account “{a}”")).unwrap_or_default();
        let name = &provider.display_name;
        match crate::broker::tokens::disconnect_grant(&self.state.app.core, provider, grant).await {
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

    /// The account a tool that uses an existing account acts on: the one named, the only one,
    /// or — with several and none named — the user's choice (form mode) or an `isError` asking
    /// for `account`.
    pub(crate) async fn pick_account(
        &self,
        caller: &Caller,
        provider: &ProviderConfig,
        named: Option<&str>,
        tool: &str,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<AccountPick, Unfinished> {
        let mut grants =
            connections::accounts_seen_by(&self.state.app.core, &caller.user.user_id, provider, &caller.user.client)
                .await
                .map_err(tool_failed)?;
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
        if !caller.form_mode {
            return Ok(AccountPick::Answer(several_accounts(provider, &grants, tool)));
        }
        let question = AccountQuestion::new(&grants, false, questions::most_recent(&grants), provider);
        let form = FormSchema::new([question.field.clone()]).map_err(tool_failed)?;
        let message = format!("You have several {} accounts. Which one should be used?", provider.display_name);
        let nothing = "Nothing was sent to the provider.";
        let reply = self.ask_form(caller, ctx, message, &form).await;
        self.log_reply(ctx, tool, provider, &reply).await;
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

    /// MCP utilities/logging: how a question ended (never the answer's values).
    pub(crate) async fn log_reply(
        &self,
        ctx: &rmcp::service::RequestContext<RoleServer>,
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
        self.log(ctx, level, json!({"tool": tool, "provider": provider.id.as_str(), "form": outcome})).await;
    }
}

/// The index of the account `name` ('' = the account without a name).
pub(crate) fn find_account(grants: &[GrantRow], name: &str) -> Option<usize> {
    grants.iter().position(|g| questions::account_name(g) == name)
}

fn unknown_account(provider: &ProviderConfig, name: &str, grants: &[GrantRow], tool: &str) -> CallToolResult {
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
