//! Time as a parameter: everything that compares against "now" asks the [`Clock`] in the
//! application state, so tests can fix time and move it forward (token expiry, state TTL,
//! refresh) without sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Unix seconds.
pub type Timestamp = i64;

pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> Timestamp;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or_default()
    }
}

/// A clock that only moves when told to; shared by cloning.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    pub fn new(start: Timestamp) -> Self {
        Self(Arc::new(AtomicI64::new(start)))
    }

    /// Starts at the current wall-clock time, so JWTs it stamps are accepted by other parties.
    pub fn starting_now() -> Self {
        Self::new(SystemClock.now())
    }

    pub fn advance(&self, seconds: i64) {
        self.0.fetch_add(seconds, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        self.0.load(Ordering::SeqCst)
    }
}

pub type SharedClock = Arc<dyn Clock>;

/// Unix seconds as `2026-11-23T21:37:20Z`; a value no calendar date fits is shown as it is.
pub fn iso_time(unix_seconds: i64) -> String {
    // humantime refuses years past 9999.
    const YEAR_10000: u64 = 253_402_300_800;
    match u64::try_from(unix_seconds) {
        Ok(seconds) if seconds < YEAR_10000 => {
            humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds))
                .to_string()
        }
        _ => unix_seconds.to_string(),
    }
}

/// A duration setting (`authorization_ttl = "10m"`, `--ttl 1h`): a number and a unit, several
/// added up. The error says so in those words, with the value, instead of the parser's
/// "expected number at 0".
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(text.trim()).map_err(|_| {
        format!(
            "{text:?} is not a duration: write a number and a unit, such as \"90s\", \"10m\", \"2h\", \"7d\" \
             or \"1h 30m\""
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_iso_8601_utc_to_the_second() {
        assert_eq!(iso_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso_time(1_795_469_840), "2026-11-23T21:37:20Z");
        assert_eq!(iso_time(-1), "-1", "no date before the epoch is invented");
        assert_eq!(iso_time(i64::MAX), i64::MAX.to_string(), "and none past year 9999");
    }

    #[test]
    fn manual_clock_moves_only_when_advanced() {
        let clock = ManualClock::new(1_000);
        assert_eq!(clock.now(), 1_000);
        clock.clone().advance(61);
        assert_eq!(clock.now(), 1_061);
    }
}
