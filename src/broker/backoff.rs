//! How long a grant's refresh waits after a transient failure (429, 5xx, timeout, no
//! connection at the token endpoint): the provider's `Retry-After` when it sent one (capped at
//! [`MAX_RETRY_AFTER`]), else exponential backoff with jitter — 1 s, 2 s, 4 s … at most
//! [`MAX_BACKOFF`], each up to half as long again at random, so instances that failed together
//! do not come back together. The wait is stored on the grant (`refresh_not_before`) so every
//! instance, and a restarted one, honours it; a success clears it.

use std::time::Duration;

/// The longest `Retry-After` honoured: a provider asking for hours would strand the grant.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);
/// The longest backoff without a `Retry-After`.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Seconds to wait after the `failures`-th transient failure in a row (1 for the first), given
/// the provider's `Retry-After` and `jitter` in [0, 1).
pub fn delay_seconds(failures: i64, retry_after: Option<Duration>, jitter: f64) -> i64 {
    if let Some(asked) = retry_after {
        // At least a second: "now" would let every waiting caller call again at once.
        return asked.min(MAX_RETRY_AFTER).as_secs().max(1) as i64;
    }
    let max = MAX_BACKOFF.as_secs() as i64;
    let exponent = u32::try_from(failures.saturating_sub(1).clamp(0, 20)).unwrap_or(20);
    let base = (1_i64 << exponent).min(max);
    let spread = (base as f64 * 0.5 * jitter.clamp(0.0, 1.0)) as i64;
    (base + spread).min(max)
}

/// A random jitter in [0, 1).
pub fn jitter() -> f64 {
    rand::random::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_honoured_and_capped() {
        assert_eq!(delay_seconds(1, Some(Duration::from_secs(30)), 0.9), 30, "no jitter on the provider's word");
        assert_eq!(delay_seconds(5, Some(Duration::from_secs(7200)), 0.0), 600, "capped at ten minutes");
        assert_eq!(delay_seconds(1, Some(Duration::ZERO), 0.0), 1, "never zero");
    }

    #[test]
    fn without_retry_after_the_backoff_doubles_with_jitter_up_to_its_cap() {
        assert_eq!([1, 2, 3, 4].map(|n| delay_seconds(n, None, 0.0)), [1, 2, 4, 8]);
        assert_eq!(delay_seconds(4, None, 0.99), 11, "up to half again");
        assert_eq!(delay_seconds(30, None, 0.0), 300, "capped");
        assert_eq!(delay_seconds(i64::MAX, None, 0.99), 300, "no overflow");
        assert_eq!(delay_seconds(0, None, 0.0), 1);
    }
}
