//! `[token_api]`: the token API's limits per service, read by
//! [`crate::identity::service_limits`] (the request budget) and [`crate::api::wait_slots`] (open
//! waits), which count them across instances.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::bail;
use serde::Deserialize;

/// The default request budget per service: 1,000 a second. A hosted tool server asks for a
/// token on every tool call it makes for a user (or every miss of its own cache); a few
/// thousand active users at one call every few seconds is several hundred a second. The budget
/// is there to stop a runaway or compromised service, not to ration a busy one.
pub const DEFAULT_REQUESTS_PER_MINUTE: u32 = 60_000;

/// `[token_api]` in the config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenApiFile {
    requests_per_minute: Option<u32>,
    open_waits: Option<u32>,
    #[serde(default, with = "super::humantime_serde_opt")]
    wait_lease: Option<Duration>,
    /// `[token_api.services.svc_NAME]`: one service's own limits.
    #[serde(default)]
    services: BTreeMap<String, ServiceLimitsFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServiceLimitsFile {
    requests_per_minute: Option<u32>,
    open_waits: Option<u32>,
}

/// One service's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceLimits {
    /// Authenticated requests per minute, up to a minute's worth at once [default: 60,000:
    /// 1,000 a second, what a hosted tool server with a few thousand active users asks for
    /// on cache misses with room to spare; see `docs/token-api.md`].
    pub requests_per_minute: u32,
    /// Long polls and event streams open at once [default: 20].
    pub open_waits: u32,
}

/// The token API's limits: defaults for every service, and per-service overrides by client id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenApiLimits {
    pub defaults: ServiceLimits,
    pub services: BTreeMap<String, ServiceLimits>,
    /// How long a wait slot lives without renewal: an instance that died holds its slots at
    /// most this long [default: 30 s, at least 3 s].
    pub wait_lease: Duration,
}

impl Default for TokenApiLimits {
    fn default() -> Self {
        Self {
            defaults: ServiceLimits { requests_per_minute: DEFAULT_REQUESTS_PER_MINUTE, open_waits: 20 },
            services: BTreeMap::new(),
            wait_lease: Duration::from_secs(30),
        }
    }
}

impl TokenApiLimits {
    pub fn resolve(file: TokenApiFile) -> anyhow::Result<Self> {
        let base = Self::default();
        let defaults = ServiceLimits {
            requests_per_minute: file.requests_per_minute.unwrap_or(base.defaults.requests_per_minute),
            open_waits: file.open_waits.unwrap_or(base.defaults.open_waits),
        };
        if defaults.requests_per_minute == 0 {
            bail!("token_api.requests_per_minute must be at least 1");
        }
        let mut services = BTreeMap::new();
        for (id, limits) in file.services {
            if !id.starts_with(crate::domain::SERVICE_CLIENT_ID_PREFIX) {
                bail!("token_api.services.{id}: a service is named by its client id (svc_…)");
            }
            let limits = ServiceLimits {
                requests_per_minute: limits.requests_per_minute.unwrap_or(defaults.requests_per_minute),
                open_waits: limits.open_waits.unwrap_or(defaults.open_waits),
            };
            if limits.requests_per_minute == 0 {
                bail!("token_api.services.{id}.requests_per_minute must be at least 1");
            }
            services.insert(id, limits);
        }
        let wait_lease = match file.wait_lease {
            Some(d) if d < Duration::from_secs(3) => bail!("token_api.wait_lease must be at least 3s"),
            Some(d) => d,
            None => base.wait_lease,
        };
        Ok(Self { defaults, services, wait_lease })
    }

    /// The limits of the service with this client id.
    pub fn of(&self, client_id: &str) -> ServiceLimits {
        self.services.get(client_id).copied().unwrap_or(self.defaults)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> anyhow::Result<TokenApiLimits> {
        #[derive(Deserialize)]
        struct File {
            token_api: TokenApiFile,
        }
        TokenApiLimits::resolve(toml::from_str::<File>(toml_text)?.token_api)
    }

    #[test]
    fn a_service_has_its_own_limits_or_the_defaults() {
        let limits = parse(
            "[token_api]\nrequests_per_minute = 10\nwait_lease = \"5s\"\n\
             [token_api.services.svc_notes]\nopen_waits = 1\n",
        )
        .unwrap();
        assert_eq!(limits.of("svc_notes"), ServiceLimits { requests_per_minute: 10, open_waits: 1 });
        assert_eq!(limits.of("svc_other"), ServiceLimits { requests_per_minute: 10, open_waits: 20 });
        assert_eq!(limits.wait_lease, Duration::from_secs(5));
    }

    #[test]
    fn nonsense_limits_are_refused() {
        for bad in [
            "[token_api]\nrequests_per_minute = 0\n",
            "[token_api]\nwait_lease = \"1s\"\n",
            "[token_api.services.notes]\nopen_waits = 1\n",
            "[token_api.services.svc_notes]\nrequests_per_minute = 0\n",
            "[token_api]\nrequests_per_second = 3\n",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
