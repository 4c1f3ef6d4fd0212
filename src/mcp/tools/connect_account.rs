//! `connect_account`: connect (or reconnect) an account at a provider through the broker's own
//! pages.
//!
//! MCP 2025-11-25 client/elicitation §URL mode: with a client that declared `elicitation.url`,
//! `connect_account` sends `elicitation/create {mode:"url"}` on the request's own stream and
//! waits (bounded, with progress notifications) for the browser flow to finish; other tools
//! answer `-32042` so the client can open the link and retry. MCP 2026-07-28 has neither: every
//! tool answers an `InputRequiredResult` with the link, and the client's retry waits
//! ([`crate::mcp::browser_wait::after_browser`]). Clients without URL mode get an
//! `isError` result with the link as text. The database row is the truth: a retried call
//! succeeds from the stored grant whether or not any notification arrived.
//!
//! §Form mode: when the user already holds an account at the provider, `connect_account`
//! without `scopes` asks which scopes to request (multi-select, what they have plus the
//! defaults ticked) and, without `account`, which account — one of theirs or another one — in
//! one form. The first connection asks nothing: the consent page shows the scopes, and clients
//! expect the link straight away. Decline or cancel connects nothing and changes nothing.
//! Without form mode: the named or default scopes, and with several accounts an `isError`
//! asking for `account`.

use rmcp::model::{CallToolResult, ElicitationAction, ErrorData};
use rmcp::service::ElicitationError;
use serde::Deserialize;
use serde_json::json;
use tokio::time::Instant;

use super::accounts::{find_account, several_accounts};
use super::asking::{ask_form, log_reply};
use super::catalogue::{CONNECT_ACCOUNT, unknown_provider};
use crate::broker::access::Standing;
use crate::broker::authorizations::{self, Ask};
use crate::broker::connections;
use crate::config::ProviderConfig;
use crate::domain::Scopes;
use crate::mcp::access::{authorization, send_to_browser, standing};
use crate::mcp::browser_wait::{
    Snapshot, Waited, cancelled_text, connected_result, declined_in_client, final_outcome, wait_for_row,
};
use crate::mcp::context::Context;
use crate::mcp::elicitation;
use crate::mcp::failure::{provider_unavailable, tool_failed};
use crate::mcp::forms::questions::{self, AccountQuestion, Picked, SCOPES, account_name, account_shown};
use crate::mcp::forms::{self, FormSchema, Reply};
use crate::mcp::logging::LogLevel;
use crate::mcp::results::{Unfinished, error_result};
use crate::store::authorizations::AuthorizationRow;
use crate::store::grants::GrantRow;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectAccount {
    pub provider: String,
    #[serde(default)]
    pub scopes: Option<Vec<String>>,
    #[serde(default)]
    pub account: Option<String>,
}

/// Which account `connect_account` works on.
enum Target {
    /// `grants[i]`: reconnect it if it lacks the scopes.
    Existing(usize),
    /// Another account (under this name, if the caller gave one).
    New(Option<String>),
}

impl ConnectAccount {
    pub async fn run(self, cx: Context<'_>) -> Result<CallToolResult, Unfinished> {
        let args = self;
        let Some(provider) = cx.core.providers.find(&args.provider) else {
            return Ok(error_result(unknown_provider(&cx.core.providers.ids(), &args.provider)));
        };
        let named_scopes = match &args.scopes {
            Some(list) => match Scopes::parse(list) {
                Ok(s) => Some(s),
                Err(e) => return Ok(error_result(e.to_string())),
            },
            None => None,
        };
        // A scope the provider does not offer is invalid input, refused before any row or
        // provider sees it (see `providers::scopes`).
        if let Some(scopes) = &named_scopes {
            crate::providers::scopes::check(&provider, scopes).map_err(|e| {
                ErrorData::invalid_params(e.to_string(), Some(serde_json::json!({"argument": "scopes"})))
            })?;
        }
        let grants = connections::accounts(cx.core, &cx.caller.user.user_id, &provider).await.map_err(tool_failed)?;
        let (target, requested) = match connect_choice(cx, &provider, &args, named_scopes, &grants).await? {
            Ok(choice) => choice,
            Err(result) => return Ok(result),
        };
        let (scopes, hint) = match target {
            Target::Existing(i) => {
                let grant = &grants[i];
                match standing(cx, &provider, Some(account_name(grant)), &requested).await? {
                    Standing::Ready(_) => return Ok(connected_result(&provider, grant)),
                    Standing::Unavailable { retry_after } => {
                        return Ok(provider_unavailable(&provider, retry_after));
                    }
                    Standing::Refused(why) => {
                        return Ok(error_result(format!("{} refused: {why}", provider.display_name)));
                    }
                    Standing::AllowClient(grant) => {
                        let before: Snapshot = grants.iter().map(|g| (g.id.clone(), g.version)).collect();
                        return start_connect(cx, &provider, &grant.scopes, Ask::UseGrant(&grant), None, &before).await;
                    }
                    standing @ (Standing::NotConnected(_) | Standing::MoreScopes { .. }) => {
                        let scopes = match standing {
                            Standing::MoreScopes { ask, .. } => ask,
                            _ => requested,
                        };
                        let hint = grant
                            .account_label
                            .as_ref()
                            .map(|_| format!("At {}, sign in as {}.", provider.display_name, account_shown(grant)));
                        (scopes, hint)
                    }
                }
            }
            Target::New(Some(name)) => (requested, Some(format!("At {}, sign in as “{name}”.", provider.display_name))),
            Target::New(None) if !grants.is_empty() => {
                (requested, Some(format!("At {}, sign in with the account to add.", provider.display_name)))
            }
            Target::New(None) => (requested, None),
        };
        let before: Snapshot = grants.iter().map(|g| (g.id.clone(), g.version)).collect();
        start_connect(cx, &provider, &scopes, Ask::Connect, hint.as_deref(), &before).await
    }
}

/// The account and scopes to connect: from the arguments, from a form (see the module
/// doc), or an answer to return as is.
async fn connect_choice(
    cx: Context<'_>,
    provider: &ProviderConfig,
    args: &ConnectAccount,
    named_scopes: Option<Scopes>,
    grants: &[GrantRow],
) -> Result<Result<(Target, Scopes), CallToolResult>, Unfinished> {
    let named_target = args.account.as_deref().map(|name| match find_account(grants, name) {
        Some(i) => Target::Existing(i),
        None => Target::New(Some(name.to_owned())),
    });
    // Which scopes, when the caller named none and the provider offers more than its
    // defaults: asked on a first connection too (the consent page then shows the choice).
    let ask_scopes = named_scopes.is_none() && questions::offers_more_than_defaults(provider);
    if grants.is_empty() && !(ask_scopes && cx.caller.form_mode) {
        let scopes = named_scopes.unwrap_or_else(|| provider.default_scopes.clone());
        return Ok(Ok((named_target.unwrap_or(Target::New(None)), scopes)));
    }
    let ask_account = !grants.is_empty() && named_target.is_none() && (grants.len() >= 2 || ask_scopes);
    if !cx.caller.form_mode || !(ask_scopes || ask_account) {
        let target = match named_target {
            Some(target) => target,
            None if grants.len() == 1 => Target::Existing(0),
            None => return Ok(Err(several_accounts(provider, grants, CONNECT_ACCOUNT))),
        };
        return Ok(Ok((target, named_scopes.unwrap_or_else(|| provider.default_scopes.clone()))));
    }
    let default = match &named_target {
        Some(Target::Existing(i)) => Some(*i),
        Some(Target::New(_)) => None,
        None => questions::most_recent(grants),
    };
    let question = ask_account.then(|| AccountQuestion::new(grants, true, default, provider));
    let mut fields: Vec<forms::Field> = question.iter().map(|q| q.field.clone()).collect();
    if ask_scopes {
        // Ticked: what the (default) account holds plus the defaults. Unticking a held scope
        // does not remove it; disconnecting does.
        let held = default.map(|i| grants[i].scopes.clone()).unwrap_or_default();
        fields.push(questions::scopes_field(provider, &provider.default_scopes.union(&held)));
    }
    let form = FormSchema::new(fields).map_err(tool_failed)?;
    let message = match (ask_account, ask_scopes) {
        (true, true) => format!("Connect {}: which account, and what may tools do there?", provider.display_name),
        (true, false) => format!("Connect {}: which account?", provider.display_name),
        _ => format!("Connect {}: what may tools do there on your behalf?", provider.display_name),
    };
    let reply = ask_form(cx, message, &form).await;
    log_reply(cx, CONNECT_ACCOUNT, provider, &reply).await;
    let answers = match reply {
        Ok(Reply::Accepted(answers)) => answers,
        Ok(Reply::Declined) => {
            return Ok(Err(error_result(format!(
                "You declined. Nothing was connected, and your {} connections are unchanged.",
                provider.display_name
            ))));
        }
        Ok(Reply::Cancelled) => {
            return Ok(Err(error_result(format!(
                "Connecting {} was cancelled; nothing changed. Call connect_account again when you are ready.",
                provider.display_name
            ))));
        }
        Err(error) => return questions::no_answer(error, "Nothing was connected.").map(Err),
    };
    let target = match (named_target, question.as_ref().and_then(|q| q.picked(&answers))) {
        (Some(target), _) => target,
        (None, Some(Picked::Existing(i))) => Target::Existing(i),
        (None, Some(Picked::New)) => Target::New(None),
        (None, None) if grants.is_empty() => Target::New(None),
        (None, None) if grants.len() == 1 => Target::Existing(0),
        (None, None) => return Ok(Err(error_result("No account was chosen. Nothing was connected."))),
    };
    let scopes = match answers.choices(SCOPES) {
        Some(chosen) => match Scopes::parse(chosen).map_err(|e| e.to_string()).and_then(|scopes| {
            crate::providers::scopes::check(provider, &scopes).map(|()| scopes).map_err(|e| e.to_string())
        }) {
            Ok(scopes) => scopes,
            Err(e) => {
                return Ok(Err(error_result(format!("Your answer could not be used: {e}. Nothing was connected."))));
            }
        },
        None => named_scopes.unwrap_or_else(|| provider.default_scopes.clone()),
    };
    Ok(Ok((target, scopes)))
}

/// Opens (or reuses) an authorization and sends the user to the browser: inline URL
/// elicitation and a bounded wait (2025-11-25), an `InputRequiredResult` whose retry waits
/// (2026-07-28), or the link as text.
async fn start_connect(
    cx: Context<'_>,
    provider: &ProviderConfig,
    scopes: &Scopes,
    ask: Ask<'_>,
    hint: Option<&str>,
    before: &Snapshot,
) -> Result<CallToolResult, Unfinished> {
    let with_hint = |text: String| match hint {
        Some(hint) => format!("{text} {hint}"),
        None => text,
    };
    let row = authorization(cx, provider, scopes, ask).await?;
    if !cx.caller.url_mode || cx.caller.round.is_some() {
        return send_to_browser(cx, provider, &row, hint);
    }
    // Subscribe before asking, so a fast browser cannot finish unseen.
    let mut events = cx.core.events.subscribe();
    let url = authorizations::connect_url(cx.core, &row.id);
    let still = |row: &AuthorizationRow| {
        format!(
            "Still waiting for you to approve in the browser. Finish at {} and call connect_account again.",
            authorizations::connect_url(cx.core, &row.id)
        )
    };
    let asked = tokio::select! {
        // The server is stopping while the client still shows the link: answer now (the
        // link stays valid; the next call, to any instance, picks it up).
        _ = cx.app.draining.cancelled() => return Ok(error_result(still(&row))),
        asked = cx.request.peer.elicit_url_with_timeout(
            with_hint(elicitation::ask_message(&row, provider, scopes)),
            url,
            row.id.clone(),
            Some(cx.core.config.connect_wait),
        ) => asked,
    };
    match asked {
        Ok(ElicitationAction::Accept) => {}
        Ok(ElicitationAction::Decline) => return Ok(declined_in_client(cx, &row, provider).await),
        Ok(_) => return Ok(error_result(cancelled_text(provider, CONNECT_ACCOUNT))),
        // A client that cannot take the request now: the error form still works.
        Err(ElicitationError::CapabilityNotSupported) | Err(ElicitationError::Service(_)) => {
            return Err(elicitation::url_elicitation_required(cx.app, &row, provider, scopes).into());
        }
        Err(other) => return Err(tool_failed(other).into()),
    }
    cx.log(
        LogLevel::Notice,
        json!({"message": "waiting for the user to approve in the browser", "provider": provider.id.as_str(), "elicitationId": row.id}),
    )
    .await;
    let deadline = Instant::now() + cx.core.config.connect_wait;
    match wait_for_row(cx, &row.id, &provider.display_name, deadline, &mut events).await? {
        Waited::Finished => {
            Ok(final_outcome(cx, provider, &row.id, before).await?.unwrap_or_else(|| error_result(still(&row))))
        }
        Waited::Cancelled => Ok(error_result("Cancelled.")),
        // The server is stopping, or the wait is over: the link stays valid and the next
        // call (to any instance) picks it up.
        Waited::Stopping | Waited::TimedOut => Ok(error_result(still(&row))),
    }
}
