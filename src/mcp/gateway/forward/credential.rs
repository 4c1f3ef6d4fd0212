//! The calling user's credential for a server behind the broker, as the gates obtain it
//! ([`super::gates`], steps 0 and 1):
//!
//! - a `provider` server: the user's token through the same path as every broker tool
//!   ([`crate::mcp::access`]: connected? scopes? refreshed? this client allowed?), so a user who
//!   has not connected — or not allowed this client — gets the broker's own link in the client's
//!   era, and the call proceeds after the browser flow; a page that approves the (client,
//!   server) pair too when that is missing as well (one visit);
//! - a `token-exchange` server: a token minted for the user and the server's service
//!   ([`crate::mcp::gateway::upstream::minted`]);
//! - any other: the server's own secret header, or nothing.
//!
//! Also the (client, server) approval asked for alone ([`ask_pair`]), the answer once the server
//! refused a token after a refresh ([`refused_again`]), and the credential a user's resources
//! list may use without asking anything ([`ready_credential`]).

use rmcp::model::CallToolResponse;

use super::forwarded::Forward;
use crate::broker::access::{Standing, standing};
use crate::broker::authorizations::connect_url;
use crate::broker::gateway_consent;
use crate::broker::provider_call;
use crate::broker::tokens::AccessToken;
use crate::mcp::access::token_for_requester;
use crate::mcp::context::Context;
use crate::mcp::elicitation;
use crate::mcp::failure::tool_failed;
use crate::mcp::gateway::catalogue::registry::ServerEntry;
use crate::mcp::gateway::state::Gateway;
use crate::mcp::gateway::upstream::credential::Credential;
use crate::mcp::gateway::upstream::minted::MintError;
use crate::mcp::results::{Unfinished, error_result};
use crate::store::gateway::GatewayAuth;

/// What a forwarded request answers instead of reaching the server.
pub(crate) type Instead = Result<CallToolResponse, Unfinished>;

/// A `provider` server's token for this user and client, `Ok(None)` for other kinds, or the
/// answer that sends the user to the broker's page first — a page that approves the (client,
/// server) pair too when `asking` names the server.
pub(crate) async fn user_token(
    cx: Context<'_>,
    entry: &ServerEntry,
    asking: Option<&ServerEntry>,
) -> Result<Option<AccessToken>, Instead> {
    let Some((provider, scopes, ..)) = entry.row.auth.user_credential() else { return Ok(None) };
    let Some(provider) = cx.core.providers.get(provider) else {
        let text = format!("The server {} needs provider {provider}, which is not configured.", entry.row.name);
        return Err(Ok(error_result(text).into()));
    };
    let mut who = cx.caller.requester();
    who.server = asking.map(|entry| entry.row.id.as_str());
    let hint = asking.map(|entry| elicitation::server_hint(entry.row.name.as_str()));
    match token_for_requester(cx, &who, &provider, None, scopes, hint.as_deref()).await {
        Ok(token) => Ok(Some(token)),
        Err(Ok(result)) => Err(Ok(result.into())),
        Err(Err(unfinished)) => Err(Err(unfinished)),
    }
}

/// The credential a request to the server carries: the user's `token` for a `provider`
/// server, a minted token for a `token-exchange` one, the server's secret otherwise; or what to
/// answer when a minted token cannot be had.
pub(crate) async fn credential_for(
    forward: &Forward<'_>,
    token: Option<&AccessToken>,
) -> Result<Option<Credential>, (Instead, &'static str)> {
    let (cx, entry) = (forward.cx, forward.entry);
    Ok(match (token, &entry.row.auth) {
        (Some(token), _) => Credential::provider(&entry.row.auth, token),
        (None, GatewayAuth::TokenExchange { service_id }) => {
            let minted = forward
                .gateway
                .minted
                .token_for(&cx.app.identity, &cx.core.store, &cx.caller.user, &entry.row.id, service_id)
                .await;
            match minted {
                Ok(minted) => Credential::minted(&minted),
                Err(MintError::Store(error)) => return Err((Err(tool_failed(error).into()), "failed")),
                Err(error) => {
                    let text = format!("The server {} cannot be called: {error}.", entry.row.name);
                    return Err((Ok(error_result(text).into()), "failed"));
                }
            }
        }
        (None, _) => Credential::shared(entry),
    })
}

/// The user has not approved this client for this server (and nothing else is missing): the
/// broker's own link to the page that asks, in the client's era — as for a missing grant
/// (`-32042` / `InputRequiredResult` / `isError` text).
pub(crate) async fn ask_pair(cx: Context<'_>, entry: &ServerEntry) -> Instead {
    let mut who = cx.caller.requester();
    who.server = Some(entry.row.id.as_str());
    let row = match gateway_consent::open(cx.core, &who, &entry.row.id, entry.row.name.as_str()).await {
        Ok(row) => row,
        Err(error) => return Err(tool_failed(error).into()),
    };
    cx.remember_elicitation(&row.id);
    if !cx.caller.url_mode {
        return Ok(error_result(elicitation::manual_server_text(cx.app, &row)).into());
    }
    match &cx.caller.round {
        Some(round) => {
            let url = connect_url(cx.core, &row.id).to_string();
            Err(round.ask_to_open(&row.id, elicitation::server_message(entry.row.name.as_str()), url).into())
        }
        None => Err(elicitation::server_elicitation_required(cx.app, &row).into()),
    }
}

/// The server refused a token after a refresh (or one that cannot be refreshed): the grant
/// needs a new consent; the answer is the broker's link to give it.
pub(crate) async fn refused_again(cx: Context<'_>, entry: &ServerEntry, token: &AccessToken) -> Instead {
    tracing::info!(server = %entry.row.name, grant = %token.grant.id, "a server behind the broker refused the user's token after a refresh; a new consent is needed");
    if let Err(error) = provider_call::refused_again(cx.core, token, entry.row.name.as_str()).await {
        return Err(tool_failed(error).into());
    }
    match user_token(cx, entry, None).await {
        Err(answer) => answer,
        // Connected again meanwhile: the client may simply call again.
        Ok(_) => {
            Ok(error_result(format!("The server {} refused your credential; call the tool again.", entry.row.name))
                .into())
        }
    }
}

/// The credential the caller's requests to `entry` carry, if it is ready without asking the
/// user anything (`Some(None)`: the server needs none); `None` if the user must act first.
pub(crate) async fn ready_credential(
    cx: Context<'_>,
    gateway: &Gateway,
    entry: &ServerEntry,
) -> Option<Option<Credential>> {
    let user = &cx.caller.user;
    match gateway_consent::approved(cx.core, &user.user_id, &user.client, &entry.row.id).await {
        Ok(true) => {}
        Ok(false) => return None,
        Err(error) => {
            tracing::warn!(server = %entry.row.name, %error, "could not read whether a client may call a server; its resources are left out of the list");
            return None;
        }
    }
    if let Some((provider_id, scopes, ..)) = entry.row.auth.user_credential() {
        let provider = cx.core.providers.get(provider_id)?;
        return match standing(cx.core, &user.user_id, &user.client, &provider, None, scopes, None).await {
            Ok(Standing::Ready(token)) => Some(Credential::provider(&entry.row.auth, &token)),
            Ok(_) => None,
            Err(error) => {
                tracing::warn!(server = %entry.row.name, %error, "could not read a user's credential for a server; its resources are left out of the list");
                None
            }
        };
    }
    if let GatewayAuth::TokenExchange { service_id } = &entry.row.auth {
        let minted = gateway.minted.token_for(&cx.app.identity, &cx.core.store, user, &entry.row.id, service_id).await;
        return match minted {
            Ok(token) => Some(Credential::minted(&token)),
            Err(error) => {
                tracing::debug!(server = %entry.row.name, %error, "no token for a server's resources/list");
                None
            }
        };
    }
    Some(Credential::shared(entry))
}
