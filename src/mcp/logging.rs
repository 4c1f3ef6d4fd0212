//! MCP logging (utilities/logging): the session's `logging/setLevel` choice and the
//! `notifications/message` the broker sends about a request.
//!
//! Who chooses the level depends on the revision ([`super::revision`]): a 2025-11-25 session
//! with `logging/setLevel`; a 2026-07-28 request with its own `_meta` logLevel, and a request
//! that names none gets no log message at all (MCP 2026-07-28 utilities/logging).

// `logging/setLevel` and `notifications/message` are deprecated by SEP-2577 (2026-07-28) but
// are part of 2025-11-25, which this server speaks.
#![allow(deprecated)]

use rmcp::RoleServer;
use rmcp::model::{
    LoggingLevel, LoggingMessageNotification, LoggingMessageNotificationParam, RequestId, ServerNotification,
};
use rmcp::service::{OriginatingRequestId, RequestContext};

/// The levels the broker itself logs at (rmcp's enum is deprecated for 2026-07-28).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
}

impl LogLevel {
    fn into_rmcp(self) -> LoggingLevel {
        match self {
            LogLevel::Debug => LoggingLevel::Debug,
            LogLevel::Info => LoggingLevel::Info,
            LogLevel::Notice => LoggingLevel::Notice,
            LogLevel::Warning => LoggingLevel::Warning,
            LogLevel::Error => LoggingLevel::Error,
        }
    }
}

pub use super::session::scope::SessionLogLevel;

/// Sends `notifications/message` about the request of `ctx` if the session (2026-07-28: the
/// request) asked for this level or a less severe one.
pub(crate) async fn send_log(
    ctx: &RequestContext<RoleServer>,
    wanted: &SessionLogLevel,
    level: LogLevel,
    data: serde_json::Value,
) {
    let level = level.into_rmcp();
    if LogWanted::of(ctx, wanted).allows(level) {
        let mut param = LoggingMessageNotificationParam::new(level, data);
        param.logger = Some("oauth-broker".into());
        let _ = ctx.peer.send_notification(logging_notification(param, &ctx.id)).await;
    }
}

/// `notifications/message` sent while handling the request `origin`: it travels on that
/// request's stream (MCP transports: what the server sends before its answer SHOULD relate to
/// the request), as the TypeScript SDK's related notifications do, so a client that has not
/// opened its GET stream yet still gets it; on the GET stream once the request is answered
/// ([`crate::mcp::transport::routes`]).
pub fn logging_notification(param: LoggingMessageNotificationParam, origin: &RequestId) -> ServerNotification {
    let mut note = LoggingMessageNotification::new(param);
    note.extensions.insert(OriginatingRequestId(origin.clone()));
    ServerNotification::LoggingMessageNotification(note)
}

/// Who decides which log messages about a request its client gets: a 2025-11-25 session's
/// `logging/setLevel` (read when each message comes, so a later change applies), or a
/// 2026-07-28 request's own `_meta` logLevel. Neither said: none.
#[derive(Clone)]
pub enum LogWanted {
    Session(SessionLogLevel),
    Request(Option<LoggingLevel>),
}

impl LogWanted {
    /// What the client of `ctx` asked for; `session`: its session's level, if it has one.
    pub(crate) fn of(ctx: &RequestContext<RoleServer>, session: &SessionLogLevel) -> Self {
        if super::revision::is_stateless(ctx) {
            LogWanted::Request(ctx.meta.log_level())
        } else {
            LogWanted::Session(session.clone())
        }
    }

    /// The least severe level the client wants now.
    pub fn minimum(&self) -> Option<LoggingLevel> {
        match self {
            LogWanted::Session(level) => *level.lock().unwrap_or_else(|p| p.into_inner()),
            LogWanted::Request(level) => *level,
        }
    }

    /// Whether a message at `level` goes to the client.
    pub fn allows(&self, level: LoggingLevel) -> bool {
        self.minimum().is_some_and(|min| severity(level) >= severity(min))
    }
}

/// Whether a message at `level` about the request of `ctx` may be sent when the caller does not
/// consult the session's level: always in a session, and in 2026-07-28 only if the request's
/// `_meta` asked for this level or a less severe one.
pub(crate) fn request_allows(ctx: &RequestContext<RoleServer>, level: LoggingLevel) -> bool {
    !super::revision::is_stateless(ctx) || ctx.meta.log_level().is_some_and(|min| severity(level) >= severity(min))
}

fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}
