//! What one upstream connection hears from its server, and what the broker tells it about
//! itself.
//!
//! - `notifications/tools/list_changed` (and `prompts/…`, `resources/list_changed`): the
//!   server's cached list is read again (over this connection) and listening clients are told
//!   if it changed.
//! - `notifications/progress` for a call in flight: passed to the client that made the call,
//!   under the client's own progress token. rmcp gives each forwarded call a token of the
//!   connection's own, so a server never learns, nor can name, a client's token.
//! - `notifications/message` (the server's log messages): to the client request in flight on
//!   this connection, on that request's stream, at the level its client asked for (a
//!   2025-11-25 session's `logging/setLevel`, a 2026-07-28 request's `_meta` logLevel), the
//!   logger named after the server. A log message carries no request id, and rmcp does not say
//!   which response stream brought it: with several requests in flight on the user's
//!   connection each gets it (they are all this user's). A message that comes after the answer
//!   (a 2025-11-25 server may send its messages on the session's GET stream, as rmcp's server
//!   does, unordered with the answer) goes to the request just answered: a 2025-11-25 session
//!   gets it on its GET stream; a 2026-07-28 request's stream has ended, so it is lost. Those
//!   that came before the answer reach the client before it ([`LogTally`]). rmcp hands each
//!   notification to this handler on a task of its own, so two messages sent back to back may
//!   reach the client in the other order.
//!
//! - `elicitation/create`: handed to the forwarded call it belongs to, which asks the user's
//!   client ([`crate::mcp::gateway::forward::questions`]); the connection declares both elicitation modes, since the
//!   broker answers for a client that declared neither.
//! - `notifications/elicitation/complete`: passed on to the session that was shown the link.
//! - `notifications/resources/updated` of a resource the user's sessions subscribed to through
//!   this connection ([`crate::mcp::gateway::forward::subscribe`]): to those sessions, under the gateway's URI.
//!
//! Sampling and roots are not relayed (rmcp declines them for us).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use rmcp::model::{
    ClientCapabilities, ClientConfig, CustomNotification, ElicitRequestParams, ElicitResult, ElicitationCapability,
    ErrorData, FormElicitationCapability, Implementation, ProgressNotificationParam, ProgressToken, RequestId,
    ResourceUpdatedNotificationParam, UrlElicitationCapability,
};
// `notifications/message` is deprecated by SEP-2577 (2026-07-28); 2025-11-25 servers send it.
#[allow(deprecated)]
use rmcp::model::LoggingMessageNotificationParam;
use rmcp::service::{InboundStreamOrigin, NotificationContext, RequestContext};
use rmcp::{ClientHandler, Peer, RoleClient, RoleServer};

use super::questions::Questions;
use super::transport::LogTally;
use crate::mcp::elicitation;
use crate::mcp::gateway::catalogue::registry::ServerEntry;
use crate::mcp::logging::LogWanted;
use crate::store::gateway::ListKind;

/// What a connection tells the catalogue of servers about its server, which keeps the lists and
/// knows the servers' names (implemented by the gateway): a trait, so that a connection knows
/// nothing of the catalogue it reports to.
pub trait ServerNews: Send + Sync {
    /// The server's registered name, if it is still registered.
    fn server_name(&self, server_id: &str) -> Option<String>;
    /// The server's resource `uri` (in its own terms) changed, for `user_id`'s sessions.
    fn resource_updated(&self, server_id: &str, user_id: String, uri: &str);
    /// The server said its list of `kind` changed: read it again over `peer`.
    fn list_changed(self: Arc<Self>, server_id: &str, kind: ListKind, peer: Peer<RoleClient>);
}

/// Where a forwarded call's progress goes: the client's peer and its token, and which
/// [`ProgressRoute`] put it there.
type Route = (Peer<RoleServer>, ProgressToken, u64);

/// Numbers each [`ProgressRoute`], so a call's route for one client request is not removed by
/// the late drop of its route for an earlier one (a call that waited in a flight,
/// `crate::mcp::gateway::forward::in_flight`, is routed again on the retry).
static ROUTES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Where a forwarded request's log messages go: the client's peer, the client request they are
/// about, the level it wants, and when the request was answered (`None`: still in flight).
#[derive(Clone)]
struct LogRoute {
    client: Peer<RoleServer>,
    request: RequestId,
    wanted: LogWanted,
    ended: Option<std::time::Instant>,
}

type LogRoutes = Arc<Mutex<HashMap<u64, LogRoute>>>;

/// The handler of one upstream connection.
#[derive(Clone)]
pub struct UpstreamHandler {
    news: Weak<dyn ServerNews>,
    server_id: String,
    routes: Arc<Mutex<HashMap<ProgressToken, Route>>>,
    /// The requests in flight whose clients hear the server's log messages.
    logs: LogRoutes,
    /// The server's log messages seen on the wire and handled here.
    log_tally: Arc<LogTally>,
    /// The server's questions, to the calls they belong to.
    pub questions: Arc<Questions>,
    /// The user whose connection this is (`None`: no user's): a resource update goes to that
    /// user's sessions only.
    user_id: Option<String>,
    /// The server's resources this user's sessions subscribed to over this connection.
    pub subscribed: Arc<Subscribed>,
}

impl UpstreamHandler {
    pub fn new(
        news: Weak<dyn ServerNews>,
        entry: &ServerEntry,
        user_id: Option<&str>,
        log_tally: Arc<LogTally>,
    ) -> Self {
        Self {
            news,
            server_id: entry.row.id.clone(),
            routes: Arc::default(),
            logs: Arc::default(),
            log_tally,
            questions: Arc::default(),
            user_id: user_id.map(str::to_owned),
            subscribed: Arc::default(),
        }
    }

    /// A handler tied to no gateway, for the pool's own tests.
    #[cfg(test)]
    pub fn detached(server_id: &str) -> Self {
        Self {
            news: Weak::<NoNews>::new(),
            server_id: server_id.to_owned(),
            routes: Arc::default(),
            logs: Arc::default(),
            log_tally: Arc::default(),
            questions: Arc::default(),
            user_id: None,
            subscribed: Arc::default(),
        }
    }

    fn routes(&self) -> std::sync::MutexGuard<'_, HashMap<ProgressToken, Route>> {
        self.routes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends what the server reports under `ours` (the token rmcp gave the forwarded call) to
    /// `client` under its own `token`, until the returned guard is dropped.
    pub fn route_progress(&self, ours: ProgressToken, client: Peer<RoleServer>, token: ProgressToken) -> ProgressRoute {
        let id = ROUTES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.routes().insert(ours.clone(), (client, token, id));
        ProgressRoute { routes: self.routes.clone(), token: ours, id }
    }
}

impl UpstreamHandler {
    /// Sends the server's log messages to `client`, about its `request`, at the level it wants,
    /// while the returned guard lives.
    pub fn route_logs(&self, client: Peer<RoleServer>, request: RequestId, wanted: LogWanted) -> LogRouteGuard {
        let id = ROUTES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let route = LogRoute { client, request, wanted, ended: None };
        let mut logs = self.logs.lock().unwrap_or_else(|p| p.into_inner());
        // Routes answered more than ROUTE_GRACE ago are let go here, by the next request, rather
        // than by a timer per request.
        logs.retain(|_, route| route.ended.is_none_or(|at| at.elapsed() < ROUTE_GRACE));
        logs.insert(id, route);
        LogRouteGuard { logs: self.logs.clone(), id }
    }

    /// Waits (at most a moment) until the log messages the server sent so far have been passed
    /// on, so the request answered next does not end its stream before them.
    pub async fn logs_settled(&self) {
        self.log_tally.settled(LOG_SETTLE).await;
    }

    /// The routes a log message arriving now goes to: the requests in flight, or, with none,
    /// those that ended within [`ROUTE_GRACE`] (the message came with the answer).
    fn log_routes(&self) -> Vec<LogRoute> {
        let logs = self.logs.lock().unwrap_or_else(|p| p.into_inner());
        let live: Vec<LogRoute> = logs.values().filter(|route| route.ended.is_none()).cloned().collect();
        if !live.is_empty() {
            return live;
        }
        logs.values().filter(|route| route.ended.is_some_and(|at| at.elapsed() < ROUTE_GRACE)).cloned().collect()
    }
}

/// The longest a forwarded request's answer waits for the server's log messages before it
/// (a client that does not take them must not hold the answer back).
const LOG_SETTLE: std::time::Duration = std::time::Duration::from_millis(500);

/// A forwarded request's log route: marked answered when dropped, let go [`ROUTE_GRACE`] later.
pub struct LogRouteGuard {
    logs: LogRoutes,
    id: u64,
}

impl Drop for LogRouteGuard {
    fn drop(&mut self) {
        if let Some(route) = self.logs.lock().unwrap_or_else(|p| p.into_inner()).get_mut(&self.id) {
            route.ended = Some(std::time::Instant::now());
        }
    }
}

/// The logger a server's message is shown under: the server's name, then its own logger's.
fn logger_of(server: &str, theirs: Option<&str>) -> String {
    match theirs {
        Some(logger) if !logger.is_empty() => format!("{server}/{logger}"),
        _ => server.to_owned(),
    }
}

/// How long a route outlives its call: rmcp hands each notification to the handler on a task
/// of its own while it delivers the answer at once, so progress the server sent just before
/// its answer may be handled just after it.
const ROUTE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// A forwarded call's progress route; removed shortly after it is dropped.
pub struct ProgressRoute {
    routes: Arc<Mutex<HashMap<ProgressToken, Route>>>,
    token: ProgressToken,
    id: u64,
}

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        let (routes, token, id) = (self.routes.clone(), self.token.clone(), self.id);
        tokio::spawn(async move {
            tokio::time::sleep(ROUTE_GRACE).await;
            let mut routes = routes.lock().unwrap_or_else(|p| p.into_inner());
            if routes.get(&token).is_some_and(|route| route.2 == id) {
                routes.remove(&token);
            }
        });
    }
}

/// The server's resources one connection is subscribed to, with how many of its user's
/// sessions hold each ([`crate::mcp::gateway::forward::subscribe`]); on a connection to a stateless 2026-07-28 server,
/// also the `subscriptions/listen` that hears each one's updates (its task, which holds the
/// listen; ended, the listen is cancelled upstream).
#[derive(Default)]
pub struct Subscribed(Mutex<HashMap<String, usize>>, Mutex<HashMap<String, tokio::task::AbortHandle>>);

impl Subscribed {
    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn listens(&self) -> std::sync::MutexGuard<'_, HashMap<String, tokio::task::AbortHandle>> {
        self.1.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a listen to the server hears `uri`'s updates on this connection now.
    pub(crate) fn listening(&self, uri: &str) -> bool {
        self.listens().get(uri).is_some_and(|task| !task.is_finished())
    }

    /// Keeps `task` as the listen for `uri`; one already running stays, and `task` is ended.
    pub(crate) fn keep_listen(&self, uri: &str, task: tokio::task::AbortHandle) {
        let mut listens = self.listens();
        match listens.get(uri) {
            Some(running) if !running.is_finished() => task.abort(),
            _ => {
                listens.insert(uri.to_owned(), task);
            }
        }
    }

    /// Ends the listen for `uri`, if there is one: `true` if there was.
    pub(crate) fn end_listen(&self, uri: &str) -> bool {
        let Some(task) = self.listens().remove(uri) else { return false };
        task.abort();
        true
    }

    /// Whether some session holds a subscription to the server's `uri`.
    pub fn holds(&self, uri: &str) -> bool {
        self.counts().contains_key(uri)
    }

    pub(crate) fn hold(&self, uri: &str) {
        *self.counts().entry(uri.to_owned()).or_default() += 1;
    }

    /// One holder fewer; `true` when it was the last.
    pub(crate) fn release(&self, uri: &str) -> bool {
        let mut counts = self.counts();
        let Some(count) = counts.get_mut(uri) else { return false };
        *count -= 1;
        if *count > 0 {
            return false;
        }
        counts.remove(uri);
        true
    }
}

impl UpstreamHandler {
    /// The server's resource `uri` changed (a 2025-11-25 server's notification): only a URI
    /// this user's sessions hold is passed on, to this user only (the sessions pick the URIs
    /// they subscribed to), under the gateway's URI.
    pub(crate) fn pass_on_update(&self, uri: &str) {
        if self.subscribed.holds(uri) {
            self.signal_update(uri);
        }
    }

    /// An update on the broker's own listen for `uri` (a stateless server's, whose only
    /// updates are those it was asked for): passed on even before the subscription that made
    /// the listen is held, which it is a moment later — the server may send one at once.
    pub(crate) fn pass_on_listened_update(&self, uri: &str) {
        self.signal_update(uri);
    }

    fn signal_update(&self, uri: &str) {
        let Some(user_id) = self.user_id.clone() else { return };
        let Some(news) = self.news.upgrade() else { return };
        news.resource_updated(&self.server_id, user_id, uri);
    }

    /// Tells the catalogue that the server's list of `kind` changed.
    fn list_changed(&self, kind: ListKind, peer: Peer<RoleClient>) {
        let Some(news) = self.news.upgrade() else { return };
        news.list_changed(&self.server_id, kind, peer);
    }

    #[allow(deprecated, reason = "notifications/message is what a 2025-11-25 server sends")]
    async fn pass_on_log(&self, params: LoggingMessageNotificationParam) {
        let Some(server) = self.news.upgrade().and_then(|news| news.server_name(&self.server_id)) else { return };
        for route in self.log_routes().into_iter().filter(|route| route.wanted.allows(params.level)) {
            let mut forwarded = LoggingMessageNotificationParam::new(params.level, params.data.clone());
            forwarded.logger = Some(logger_of(server.as_str(), params.logger.as_deref()));
            let note = crate::mcp::logging::logging_notification(forwarded, &route.request);
            let _ = route.client.send_notification(note).await;
        }
    }
}

impl ClientHandler for UpstreamHandler {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.client_info = Implementation::new("oauth-broker-gateway", env!("CARGO_PKG_VERSION"));
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(
            ElicitationCapability::new()
                .with_form(FormElicitationCapability::default())
                .with_url(UrlElicitationCapability::default()),
        );
        info.capabilities = capabilities;
        info
    }

    // MCP 2025-11-25 client/elicitation: the server's question, asked of the user through the
    // client call it belongs to.
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let origin = context.extensions.get::<InboundStreamOrigin>();
        tokio::select! {
            answer = self.questions.ask(origin, request) => answer,
            _ = context.ct.cancelled() => Err(ErrorData::internal_error("cancelled by the server", None)),
        }
    }

    // MCP 2025-11-25 client/elicitation §Completion notifications: only to the session that was
    // shown the link, under the id it was given.
    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        if notification.method != elicitation::COMPLETE_METHOD {
            return;
        }
        let theirs = notification.params.as_ref().and_then(|p| p.get("elicitationId")).and_then(|v| v.as_str());
        if let Some((session, ours)) = theirs.and_then(|id| self.questions.take_link(id)) {
            session.notify(elicitation::complete_notification(&ours));
        }
    }

    // The list is read again by the catalogue, not on the connection's own task: it is read
    // over this very connection.
    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        self.list_changed(ListKind::Tools, context.peer);
    }

    async fn on_prompt_list_changed(&self, context: NotificationContext<RoleClient>) {
        self.list_changed(ListKind::Prompts, context.peer);
    }

    async fn on_resource_list_changed(&self, context: NotificationContext<RoleClient>) {
        self.list_changed(ListKind::Resources, context.peer);
    }

    // MCP 2025-11-25 server/resources §Subscriptions.
    async fn on_resource_updated(&self, params: ResourceUpdatedNotificationParam, _: NotificationContext<RoleClient>) {
        self.pass_on_update(&params.uri);
    }

    // MCP 2025-11-25 server/utilities/logging: the server's messages reach the user's client
    // request in flight, at the level that client asked for.
    #[allow(deprecated, reason = "notifications/message is what a 2025-11-25 server sends")]
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.pass_on_log(params).await;
        self.log_tally.handled();
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        let route = self.routes().get(&params.progress_token).cloned();
        let Some((client, token, _)) = route else { return };
        let mut forwarded = ProgressNotificationParam::new(token, params.progress);
        forwarded.total = params.total;
        forwarded.message = params.message;
        let _ = client.notify_progress(forwarded).await;
    }
}

/// The catalogue of a connection that reports to none (the pool's own tests).
#[cfg(test)]
struct NoNews;

#[cfg(test)]
impl ServerNews for NoNews {
    fn server_name(&self, _: &str) -> Option<String> {
        None
    }
    fn resource_updated(&self, _: &str, _: String, _: &str) {}
    fn list_changed(self: Arc<Self>, _: &str, _: ListKind, _: Peer<RoleClient>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_servers_messages_are_shown_under_its_name() {
        assert_eq!(logger_of("crm", Some("db")), "crm/db");
        assert_eq!(logger_of("crm", None), "crm");
        assert_eq!(logger_of("crm", Some("")), "crm");
    }

    #[test]
    fn the_last_holder_of_a_uri_is_the_one_that_lets_it_go() {
        let subscribed = Subscribed::default();
        subscribed.hold("note://a");
        subscribed.hold("note://a");
        assert!(subscribed.holds("note://a") && !subscribed.holds("note://b"));
        assert!(!subscribed.release("note://a"), "another session still holds it");
        assert!(subscribed.release("note://a"), "the last one");
        assert!(!subscribed.holds("note://a"));
        assert!(!subscribed.release("note://a"), "nothing held: nothing to let go");
    }
}
