//! The gates every request forwarded to a server behind the broker passes, in order — a
//! `tools/call` ([`super::tool_call`]), a `prompts/get` or `resources/read`
//! ([`super::content`]), a `resources/subscribe` ([`super::subscribe`]):
//!
//! 0. **The (client, server) pair** approved by the user ([`crate::broker::gateway_consent`]);
//!    if not, the broker's link to the page that approves it (with the credential, if that is
//!    missing too: one visit).
//! 1. **The credential** of the calling user ([`super::credential`]).
//! 2. **The attempt** over the user's own connection ([`super::rounds`], [`super::attempt`]):
//!    the connection opened on first use in the revision the server speaks, the credential set
//!    in its cell before each call (so a refreshed token is used at once), the request sent and
//!    waited on within `gateway.call_timeout` (not counting the time the user takes to answer
//!    the server's questions), the client's progress token routed, the upstream call cancelled
//!    when the client cancels; the server's round trips and questions relayed in the client's
//!    era.
//! 3. **A `token-exchange` server's `-32042`** that carries the broker's own link is shown as
//!    the broker's ([`super::brokers_link`]); any other server's as its own pages
//!    ([`super::server_pages`]).
//! 4. **A 401** (a `WWW-Authenticate` challenge, RFC 6750 §3): one forced refresh and one retry;
//!    refused again, the grant needs a new consent and the client gets the reconnect link.
//! 5. **A server that is down**, breaks off or times out: a retryable `isError` naming it; the
//!    connection is dropped and the next call opens another ([`super::outcome`]).

use super::brokers_link::brokers_link_from_server;
use super::credential::{ask_pair, credential_for, refused_again, user_token};
use super::failure::Failure;
use super::forwarded::{Answer, Forward};
use super::outcome::{instead, settle};
use super::rounds;
use crate::broker::gateway_consent;
use crate::broker::provider_call::retry_token_after_401;
use crate::mcp::failure::tool_failed;
use crate::mcp::gateway::upstream::credential::Credential;
use crate::mcp::results::Unfinished;
use crate::store::gateway::GatewayAuth;

/// `forward` through every gate (steps 0–5 above): the answer, and the outcome label audited
/// and counted.
pub(crate) async fn pass(forward: &Forward<'_>) -> (Result<Answer, Unfinished>, &'static str) {
    let (cx, entry) = (forward.cx, forward.entry);
    // 0. The (client, server) pair: approved by the user, or asked for — together with the
    //    credential when that is missing too, so one visit covers both.
    let user = &cx.caller.user;
    let approved = match gateway_consent::approved(cx.core, &user.user_id, &user.client, &entry.row.id).await {
        Ok(approved) => approved,
        Err(error) => return (Err(tool_failed(error).into()), "failed"),
    };
    let asking = (!approved).then_some(entry.as_ref());
    // 1. The credential.
    let token = match user_token(cx, entry, asking).await {
        Ok(token) => token,
        Err(answer) => return (instead(answer), "needs_user"),
    };
    if !approved {
        return (instead(ask_pair(cx, entry).await), "needs_user");
    }
    let credential = match credential_for(forward, token.as_ref()).await {
        Ok(credential) => credential,
        Err((answer, outcome)) => return (instead(answer), outcome),
    };
    // 2. The attempt.
    let first = rounds::attempt(forward, credential).await;
    if matches!(entry.row.auth, GatewayAuth::TokenExchange { .. }) {
        match first {
            // 3. The tool server passes on the broker's own link (its user must connect, or
            //    allow its service): shown as the broker's, in the client's era.
            Err(Failure::ServerLink { error, questions }) => {
                let (answer, outcome) = brokers_link_from_server(cx, entry, error, questions).await;
                return (instead(answer), outcome);
            }
            // A refused token is never offered again.
            Err(Failure::Unauthorized) => forward.gateway.minted.forget(user, &entry.row.id),
            _ => {}
        }
    }
    let (Err(Failure::Unauthorized), Some(token)) = (&first, &token) else {
        return settle(cx, entry, first);
    };
    // 4. A 401: one forced refresh and one retry, then a new consent.
    let provider = entry.row.auth.user_credential().and_then(|(p, ..)| cx.core.providers.get(p));
    if let Some(provider) = provider
        && let Some(fresh) = retry_token_after_401(cx.core, &provider, token).await
    {
        let second = rounds::attempt(forward, Credential::provider(&entry.row.auth, &fresh)).await;
        if !matches!(second, Err(Failure::Unauthorized)) {
            return settle(cx, entry, second);
        }
        return (instead(refused_again(cx, entry, &fresh).await), "unauthorized");
    }
    (instead(refused_again(cx, entry, token).await), "unauthorized")
}
