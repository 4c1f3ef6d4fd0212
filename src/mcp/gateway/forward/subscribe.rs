//! `resources/subscribe` to a server's resource (MCP 2025-11-25 server/resources
//! §Subscriptions), for a 2025-11-25 session of the broker's.
//!
//! The subscription goes to the server through the same gates as a read ([`super::gates`]: the
//! (client, server) approval, the user's own credential on the user's own connection, audit),
//! over that connection. The session then holds a [`Held`] subscription until it unsubscribes
//! or ends; while any is held, the connection is in use, so the pool never closes it as idle
//! (a server's updates come on that connection's stream). The server's
//! `notifications/resources/updated` for a held URI reaches this user's sessions that
//! subscribed to it, under the gateway's URI ([`crate::mcp::gateway::upstream::client`]); the last session to let go
//! of a URI unsubscribes upstream.
//!
//! A 2026-07-28 client's `subscriptions/listen` naming a server's resource gets the same: its
//! acknowledgement (sent before anything else runs) accepts a URI of a registered server that
//! keeps sessions ([`crate::mcp::gateway::state::Gateway::subscribable`]); then the listen
//! subscribes on the server through the same gates, for every such URI, and holds the
//! subscriptions while it listens ([`hold_for_listen`]). A URI whose gates need the user first (no grant, the
//! client not yet approved for the server) ends the listen with `-32602` saying so — a listen
//! cannot send the user a link; reading the resource does — and nothing stays subscribed.
//!
//! A server that speaks the stateless 2026-07-28 revision has no `resources/subscribe` and no
//! standing stream: the broker sends it a `subscriptions/listen` of its own naming the resource,
//! over the user's connection and after the same gates ([`super::upstream_listen`]), one
//! per URI per connection whatever the number of the user's sessions holding it, and passes the
//! updates on that listen's stream on as a 2025-11-25 server's; the last holder to let go
//! cancels it.
//!
//! A subscription ends with the connection (or listen) it was made on: when the server breaks
//! it off, the session subscribes again to hear more (a listen: listens again).

// `resources/subscribe` and `resources/unsubscribe` are legacy in rmcp (2026-07-28 has
// `subscriptions/listen`), and they are what a 2025-11-25 server speaks.
#![allow(deprecated)]

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{
    ClientRequest, ErrorData, ServerResult, SubscribeRequest, SubscribeRequestParams, SubscriptionFilter,
    UnsubscribeRequestParams,
};
use serde_json::json;

use super::content::{Plain, plain, unexpected};
use super::forwarded::{Answer, Forward, Forwarded, SentOver};
use super::gates;
use super::outcome::audit;
use crate::mcp::context::Context;
use crate::mcp::elicitation::URL_ELICITATION_REQUIRED;
use crate::mcp::gateway::catalogue::registry::ServerEntry;
use crate::mcp::gateway::catalogue::uri;
use crate::mcp::gateway::state::Gateway;
use crate::mcp::gateway::upstream::pool::Upstream;
use crate::mcp::gateway::upstream::revision::Revision;
use crate::mcp::resources::uri::not_found;
use crate::mcp::results::Unfinished;

/// One session's subscription to a server's resource: holds the connection it was made on open
/// (the pool counts it as in use) and, when dropped, unsubscribes upstream if no other session
/// of the user still holds the URI.
pub struct Held {
    connection: Arc<Upstream>,
    uri: String,
    /// Made on a stateless server, by a listen: nothing to unsubscribe.
    stateless: bool,
}

impl Held {
    fn new(connection: Arc<Upstream>, uri: String, stateless: bool) -> Self {
        connection.service.service().subscribed.hold(&uri);
        Self { connection, uri, stateless }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let subscribed = &self.connection.service.service().subscribed;
        if !subscribed.release(&self.uri) {
            return;
        }
        // A stateless server's listen is cancelled by ending it; it has nothing to unsubscribe.
        if subscribed.end_listen(&self.uri) || self.stateless {
            return;
        }
        // Outside a runtime (the process is ending) there is nobody left to tell.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let peer = self.connection.service.peer().clone();
        let params = UnsubscribeRequestParams::new(std::mem::take(&mut self.uri));
        // The connection may be closing (the session ended with others); a failure is moot.
        runtime.spawn(async move {
            let _ = peer.unsubscribe(params).await;
        });
    }
}

/// The subscriptions on servers behind the broker that a `subscriptions/listen` accepted (MCP
/// 2026-07-28 basic/subscriptions), made through the gates and held while it listens; dropped,
/// each is let go of (the last holder unsubscribes upstream). The first that cannot be made ends
/// the listen with its reason, and those made before are let go of.
pub(crate) async fn hold_for_listen(
    cx: Context<'_>,
    gateway: &Arc<Gateway>,
    accepted: &SubscriptionFilter,
) -> Result<Vec<Held>, ErrorData> {
    let mut held = Vec::new();
    for uri in accepted.resource_subscriptions.iter().flatten() {
        match Box::pin(subscribe(cx, gateway, uri, |subscription| held.push(subscription))).await {
            None | Some(Ok(())) => {}
            Some(Err(error)) => return Err(not_listened(uri, error)),
        }
    }
    Ok(held)
}

/// `resources/subscribe` of a URI in the gateway's scheme ([`uri`]): `None` if `uri` is not one;
/// otherwise the subscription, given to `keep` (the session or listen that holds it) before
/// anything else waits — the server may send an update at once —, or why there is none.
// MCP 2025-11-25 server/resources §Subscriptions.
pub(crate) async fn subscribe(
    cx: Context<'_>,
    gateway: &Arc<Gateway>,
    uri: &str,
    keep: impl FnOnce(Held),
) -> Option<Result<(), ErrorData>> {
    if !uri::is_gateway(uri) {
        return None;
    }
    let Some((entry, theirs)) = gateway.resolve_resource(uri) else {
        return Some(Err(not_found(uri)));
    };
    // To a stateless server, this goes as a listen ([`super::upstream_listen`]).
    let request = ClientRequest::SubscribeRequest(SubscribeRequest::new(SubscribeRequestParams::new(&theirs)));
    let sent_over = SentOver::default();
    let what = Forwarded::Plain { request: Box::new(request), responses: None, sent_over: Some(&sent_over) };
    let started = Instant::now();
    let (answer, outcome) = gates::pass(&Forward::new(cx, gateway, &entry, what)).await;
    // Held before anything else waits: the server may send an update at once, and one that
    // arrives before the URI is held is not passed on.
    let kept = held(&entry, theirs, answer, &sent_over).map(keep);
    // The URI is left out of the audit, as for a read.
    audit(cx, &entry, "resource=subscribe", outcome, started.elapsed()).await;
    Some(kept)
}

/// The subscription `answer` made, held on the connection it went over, or why there is none.
fn held(
    entry: &ServerEntry,
    upstream: String,
    answer: Result<Answer, Unfinished>,
    sent_over: &SentOver,
) -> Result<Held, ErrorData> {
    let subscribed = match plain(entry, answer) {
        Ok(Plain::Done(done)) => match *done {
            ServerResult::EmptyResult(_) => Ok(()),
            other => Err(unexpected(entry, &other)),
        },
        // A 2025-11-25 session is never sent a round.
        Ok(Plain::InputRequired(_)) => Err(ErrorData::internal_error("the subscription needs input first", None)),
        Err(error) => Err(error),
    };
    subscribed?;
    // The connection the subscription went over: a reconnect in the meantime (a 401's) may
    // have put another in the pool, which never got it.
    let connection = sent_over.lock().unwrap_or_else(|p| p.into_inner()).take();
    let Some(connection) = connection.filter(|connection| connection.is_usable()) else {
        let text = format!("The server {} closed the connection; subscribe again.", entry.row.name);
        return Err(ErrorData::internal_error(text, Some(json!({"server": entry.row.name.as_str()}))));
    };
    let stateless = entry.revision.get() == Some(Revision::Stateless);
    Ok(Held::new(connection, upstream, stateless))
}

/// Why a listen could not hold `uri`: the gates' own reason, except that a link to a page
/// (`-32042`, which a listen cannot pass on) says what to do instead.
fn not_listened(uri: &str, error: ErrorData) -> ErrorData {
    if error.code != URL_ELICITATION_REQUIRED {
        return error;
    }
    let server = error.data.as_ref().and_then(|data| data.get("server")).cloned();
    ErrorData::invalid_params(
        format!(
            "Listening to {uri} needs you first (to connect an account, or to allow this client for its server); read it to be asked, then listen again."
        ),
        Some(json!({"uri": uri, "server": server})),
    )
}
