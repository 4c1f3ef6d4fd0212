//! `[webhooks]`: how the broker delivers events to services' webhooks
//! (`src/events/webhooks`).

use std::time::Duration;

use anyhow::bail;
use serde::Deserialize;

/// `[webhooks]` in the config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhooksFile {
    #[serde(default, with = "super::humantime_serde_opt")]
    retry_window: Option<Duration>,
    #[serde(default, with = "super::humantime_serde_opt")]
    timeout: Option<Duration>,
    #[serde(default, with = "super::humantime_serde_opt")]
    secret_overlap: Option<Duration>,
    #[serde(default, with = "super::humantime_serde_opt")]
    poll_interval: Option<Duration>,
    allow_private_targets: Option<bool>,
}

/// Webhook delivery settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSettings {
    /// An event not delivered this long after it happened is dead-lettered after its next
    /// failed attempt (`retry_window`) [default: 24 h, between 1 min and 30 days].
    pub retry_window: Duration,
    /// One attempt's bound, from connecting to the receiver's answer (`timeout`) [default:
    /// 10 s, between 1 s and 60 s].
    pub timeout: Duration,
    /// After `rotate-webhook-secret`, the previous secret still signs (beside the new one) for
    /// this long (`secret_overlap`) [default: 24 h, at most 30 days].
    pub secret_overlap: Duration,
    /// Deliveries are woken at once by the change that wrote them on this instance; this is
    /// the backstop for events written by other instances and for retries
    /// (`poll_interval`) [default: 5 s, between 100 ms and 5 min].
    pub poll_interval: Duration,
    /// Endpoints on loopback or private addresses (and plain http on loopback) are accepted.
    /// For tests and closed networks only (`allow_private_targets`) [default: false].
    pub allow_private_targets: bool,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            retry_window: Duration::from_secs(24 * 3600),
            timeout: Duration::from_secs(10),
            secret_overlap: Duration::from_secs(24 * 3600),
            poll_interval: Duration::from_secs(5),
            allow_private_targets: false,
        }
    }
}

const MONTH: Duration = Duration::from_secs(30 * 24 * 3600);

impl WebhookSettings {
    pub(super) fn resolve(file: WebhooksFile) -> anyhow::Result<Self> {
        let default = Self::default();
        let within = |value: Option<Duration>, name: &str, min: Duration, max: Duration, default: Duration| match value
        {
            Some(d) if d < min || d > max => {
                bail!(
                    "[webhooks] {name} must be between {} and {}",
                    humantime::format_duration(min),
                    humantime::format_duration(max)
                )
            }
            Some(d) => Ok(d),
            None => Ok(default),
        };
        Ok(Self {
            retry_window: within(
                file.retry_window,
                "retry_window",
                Duration::from_secs(60),
                MONTH,
                default.retry_window,
            )?,
            timeout: within(file.timeout, "timeout", Duration::from_secs(1), Duration::from_secs(60), default.timeout)?,
            secret_overlap: within(
                file.secret_overlap,
                "secret_overlap",
                Duration::ZERO,
                MONTH,
                default.secret_overlap,
            )?,
            poll_interval: within(
                file.poll_interval,
                "poll_interval",
                Duration::from_millis(100),
                Duration::from_secs(300),
                default.poll_interval,
            )?,
            allow_private_targets: file.allow_private_targets.unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_values_are_refused_in_the_operators_words() {
        let file: WebhooksFile = toml::from_str("retry_window = \"10s\"").unwrap();
        let error = WebhookSettings::resolve(file).unwrap_err().to_string();
        assert!(error.contains("[webhooks] retry_window must be between 1m and 30days"), "{error}");
        let file: WebhooksFile = toml::from_str("").unwrap();
        assert_eq!(WebhookSettings::resolve(file).unwrap(), WebhookSettings::default());
    }
}
