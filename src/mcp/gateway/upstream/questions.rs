//! The questions of one upstream connection ([`Questions`]): a server behind the broker sends
//! `elicitation/create` during a forwarded request, and rmcp marks it with the upstream request
//! whose response stream carried it (`InboundStreamOrigin`, SEP-2260). Each forwarded call (and
//! plain request) registers its upstream request id ([`Questions::route_call`]), so the question
//! goes to the client request that caused it. A question on no call's stream goes to the
//! connection's one call in flight, and is refused when there are none or several. The
//! connection is its user's alone ([`super::pool`]), so a question can never reach another
//! user's client.
//!
//! It also remembers, for a relayed URL elicitation, which session knows it under which of the
//! broker's ids, so the server's `notifications/elicitation/complete` reaches that session
//! ([`Questions::take_link`]). Asking the user is [`crate::mcp::gateway::forward::questions`]'s.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rmcp::model::{ElicitRequestParams, ElicitResult, ErrorData, RequestId};
use rmcp::service::InboundStreamOrigin;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::mcp::session::scope::SessionScope;

/// A question from the server, and where its answer goes.
pub struct Question {
    pub params: ElicitRequestParams,
    pub answer: oneshot::Sender<Result<ElicitResult, ErrorData>>,
}

/// A relayed URL elicitation waiting for the server's completion notification.
struct Link {
    /// The id the client was given.
    ours: String,
    session: Weak<SessionScope>,
    until: Instant,
}

/// The questions of one upstream connection: the calls in flight that can take one, and the
/// URL elicitations whose completion the client is still to hear of.
#[derive(Default)]
pub struct Questions {
    calls: Mutex<HashMap<RequestId, mpsc::Sender<Question>>>,
    links: Mutex<HashMap<String, Link>>,
}

/// A forwarded call's registration; removed when dropped.
pub struct CallRoute {
    questions: Arc<Questions>,
    id: RequestId,
}

impl Drop for CallRoute {
    fn drop(&mut self) {
        self.questions.calls().remove(&self.id);
    }
}

impl Questions {
    fn calls(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, mpsc::Sender<Question>>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn links(&self) -> std::sync::MutexGuard<'_, HashMap<String, Link>> {
        self.links.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The questions the server asks within the upstream request `id`, until the route drops.
    pub fn route_call(self: &Arc<Self>, id: RequestId) -> (CallRoute, mpsc::Receiver<Question>) {
        // One at a time: a server asks the next question after the user answered this one.
        let (sender, receiver) = mpsc::channel(1);
        self.calls().insert(id.clone(), sender);
        (CallRoute { questions: self.clone(), id }, receiver)
    }

    /// Hands the server's question to the call it belongs to and waits for the answer.
    pub async fn ask(
        &self,
        origin: Option<&InboundStreamOrigin>,
        params: ElicitRequestParams,
    ) -> Result<ElicitResult, ErrorData> {
        let call = {
            let calls = self.calls();
            match origin {
                Some(InboundStreamOrigin::OutboundRequest(id)) => calls.get(id).cloned(),
                _ if calls.len() == 1 => calls.values().next().cloned(),
                _ => None,
            }
        };
        let Some(call) = call else {
            return Err(ErrorData::invalid_request(
                "the broker relays a question only within a request it forwarded to you",
                None,
            ));
        };
        let (answer, answered) = oneshot::channel();
        if call.send(Question { params, answer }).await.is_err() {
            return Err(call_ended());
        }
        answered.await.unwrap_or_else(|_| Err(call_ended()))
    }

    /// Remembers that the client knows the server's URL elicitation `theirs` as `ours`.
    pub fn remember_link(&self, theirs: String, ours: String, session: &Arc<SessionScope>, ttl: Duration) {
        let now = Instant::now();
        let mut links = self.links();
        links.retain(|_, link| link.until > now);
        links.insert(theirs, Link { ours, session: Arc::downgrade(session), until: now + ttl });
    }

    /// The session asked for the server's elicitation `theirs`, and the id it knows it by.
    pub fn take_link(&self, theirs: &str) -> Option<(Arc<SessionScope>, String)> {
        let link = self.links().remove(theirs)?;
        if link.until <= Instant::now() {
            return None;
        }
        Some((link.session.upgrade()?, link.ours))
    }
}

fn call_ended() -> ErrorData {
    ErrorData::internal_error("the tool call ended before the user answered", None)
}
