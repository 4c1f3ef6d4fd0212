//! Waiting for an event the test cannot be told of directly, by asking until it happened.

use std::time::Duration;

/// What a check given to [`eventually`] reports: whether the awaited event has happened yet,
/// and what it brings.
///
/// `true`, `Some(value)` and `Ok(value)` say it has; `false`, `None` and `Err(seen)` say not yet,
/// an `Err` naming what the check saw instead, for the failure message.
pub trait Observed {
    /// What `eventually` returns once the event happened.
    type Value;
    /// The value once the event happened; otherwise what was seen instead, if the check said.
    fn settled(self) -> Result<Self::Value, Option<String>>;
}

impl Observed for bool {
    type Value = ();
    fn settled(self) -> Result<(), Option<String>> {
        if self { Ok(()) } else { Err(None) }
    }
}

impl<T> Observed for Option<T> {
    type Value = T;
    fn settled(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

impl<T, E: std::fmt::Display> Observed for Result<T, E> {
    type Value = T;
    fn settled(self) -> Result<T, Option<String>> {
        self.map_err(|seen| Some(seen.to_string()))
    }
}

/// How often [`eventually`] looks again: the wait ends on the event itself, so this only bounds
/// how late the test notices it.
const POLL_EVERY: Duration = Duration::from_millis(10);

/// Waits for an event the test cannot be told of directly — a server up, a row changed, a
/// counter moved, a change made by another process reaching a server's caches (issue 11) —
/// by asking `check` until it reports the event, and returns what it reported (see
/// [`Observed`]). Tests wait for events this way, never for a fixed time: a passing test waits
/// only as long as the event takes, and `within` is a bound for a broken one, generous because
/// the machine may be loaded. When `within` passes first it panics with `what` (the event, as a
/// sentence) and the last thing the check saw.
pub async fn eventually<F, Fut>(what: &str, within: Duration, mut check: F) -> <Fut::Output as Observed>::Value
where
    F: FnMut() -> Fut,
    Fut: std::future::Future,
    Fut::Output: Observed,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let seen = match check().await.settled() {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        if tokio::time::Instant::now() >= deadline {
            match seen {
                Some(seen) => panic!("not within {within:?}: {what} (last seen: {seen})"),
                None => panic!("not within {within:?}: {what}"),
            }
        }
        // The pace of looking again (see POLL_EVERY), not a wait for an outcome.
        tokio::time::sleep(POLL_EVERY).await;
    }
}
