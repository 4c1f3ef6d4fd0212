//! The loop of every background sweeper and refresher: wake each period and work on something
//! held weakly, until the app stops or that thing is gone (so the task never keeps it alive).

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Wakes every `period` with what it was made for, until `stop` or until that is dropped.
pub struct Every<T> {
    weak: Weak<T>,
    period: Duration,
    stop: CancellationToken,
}

impl<T> Every<T> {
    pub fn new(of: &Arc<T>, period: Duration, stop: CancellationToken) -> Self {
        Self { weak: Arc::downgrade(of), period, stop }
    }

    /// Waits one period; then the thing again, or `None` once the loop should end.
    pub async fn tick(&self) -> Option<Arc<T>> {
        tokio::select! {
            _ = self.stop.cancelled() => None,
            _ = tokio::time::sleep(self.period) => self.weak.upgrade(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn it_ticks_until_stopped_or_until_its_thing_is_gone() {
        let thing = Arc::new(7);
        let stop = CancellationToken::new();
        let every = Every::new(&thing, Duration::from_millis(1), stop.clone());
        assert_eq!(every.tick().await.as_deref(), Some(&7));

        drop(thing);
        assert!(every.tick().await.is_none(), "gone: the loop ends");

        let other = Arc::new(8);
        let every = Every::new(&other, Duration::from_secs(3600), stop.clone());
        stop.cancel();
        assert!(every.tick().await.is_none(), "stopped: at once, not after the period");
    }
}
