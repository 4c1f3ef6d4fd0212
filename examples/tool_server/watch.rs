//! Following an authorization while the user is in the browser: long polls of
//! `GET /v1/authorizations/{id}?wait=N`.
//!
//! - [`until_final`] (2025-11-25 sessions, in the background): until a final status, the
//!   authorization's expiry, the session's end or shutdown, whichever comes first;
//! - [`within`] (2026-07-28 retries, while the client's request is open): at most a bounded wait,
//!   so the answer comes before the client's own request timeout.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;

use super::broker::{AuthorizationStatus, BrokerClient, PendingAuthorization, Poll, WAIT_SECONDS};

/// Used when the broker named no expiry (it always should).
const DEFAULT_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// Pause after a failed poll, and the least time between two polls (if `wait` was not honoured).
const BACKOFF: Duration = Duration::from_secs(5);
const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// True when the user completed the authorization.
pub async fn until_final(
    broker: &BrokerClient,
    authorization: &PendingAuthorization,
    cancel: &CancellationToken,
) -> bool {
    let deadline = tokio::time::Instant::now() + lifetime(authorization.expires_at);
    let id = authorization.id.as_str();
    loop {
        let started = tokio::time::Instant::now();
        let poll = tokio::select! {
            _ = cancel.cancelled() => return false,
            _ = tokio::time::sleep_until(deadline) => return false,
            poll = broker.poll_authorization(id, WAIT_SECONDS) => poll,
        };
        let pause = match poll {
            Poll::Status(AuthorizationStatus::Completed) => return true,
            Poll::Status(AuthorizationStatus::Pending) => MIN_INTERVAL.saturating_sub(started.elapsed()),
            Poll::Status(status) => {
                tracing::info!(elicitation = %id, ?status, "authorization ended without completion");
                return false;
            }
            Poll::Unknown => {
                tracing::info!(elicitation = %id, "the broker no longer knows this authorization");
                return false;
            }
            Poll::Transient(why) => {
                tracing::warn!(elicitation = %id, %why, "authorization poll failed; retrying");
                BACKOFF
            }
        };
        tokio::select! {
            _ = cancel.cancelled() => return false,
            _ = tokio::time::sleep_until(deadline) => return false,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// Where an authorization stood when [`within`] stopped waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// The user finished: the real call can be made now.
    Completed,
    /// Still open when the wait ran out (or the broker could not be asked): ask again later.
    Open,
    /// Declined, failed or expired: this authorization will never complete.
    Ended(AuthorizationStatus),
    /// The broker does not know it (any more, or it was never this service's).
    Unknown,
}

/// Waits at most `wait` for the authorization to reach a final status; a zero wait looks once.
pub async fn within(broker: &BrokerClient, id: &str, wait: Duration, cancel: &CancellationToken) -> Settled {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let started = tokio::time::Instant::now();
        // Whole seconds, as the broker takes them; the last look (under a second left) is at once.
        let seconds = deadline.saturating_duration_since(started).as_secs();
        let poll = tokio::select! {
            _ = cancel.cancelled() => return Settled::Open,
            poll = broker.poll_authorization(id, seconds) => poll,
        };
        let pause = match poll {
            Poll::Status(AuthorizationStatus::Completed) => return Settled::Completed,
            Poll::Status(AuthorizationStatus::Pending) if seconds == 0 => return Settled::Open,
            Poll::Status(AuthorizationStatus::Pending) => MIN_INTERVAL.saturating_sub(started.elapsed()),
            Poll::Status(status) => return Settled::Ended(status),
            Poll::Unknown => return Settled::Unknown,
            Poll::Transient(why) => {
                tracing::warn!(elicitation = %id, %why, "authorization poll failed");
                BACKOFF
            }
        };
        if tokio::time::Instant::now() + pause >= deadline {
            return Settled::Open;
        }
        tokio::select! {
            _ = cancel.cancelled() => return Settled::Open,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// Time left until `expires_at` (Unix seconds) plus a minute of grace for clock skew.
pub fn lifetime(expires_at: Option<i64>) -> Duration {
    let Some(expires_at) = expires_at else { return DEFAULT_LIFETIME };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or_default();
    Duration::from_secs(expires_at.saturating_sub(now).clamp(0, 24 * 3600) as u64 + 60)
}
