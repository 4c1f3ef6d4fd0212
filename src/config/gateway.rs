//! `[gateway]`: the connections to the MCP servers behind the broker (gateway mode;
//! `crate::mcp::gateway`).

use std::time::Duration;

use anyhow::bail;
use serde::Deserialize;

/// `[gateway]` in the config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayFile {
    #[serde(default, with = "super::humantime_serde_opt")]
    idle: Option<Duration>,
    max_connections: Option<usize>,
    #[serde(default, with = "super::humantime_serde_opt")]
    call_timeout: Option<Duration>,
    #[serde(default, with = "super::humantime_serde_opt")]
    question_wait: Option<Duration>,
    #[serde(default, with = "super::humantime_serde_opt")]
    list_refresh: Option<Duration>,
    instance_url: Option<String>,
}

/// The gateway's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewaySettings {
    /// A user's connection to a server closes after this long without a call (one with a call
    /// running or parked on a question is never idle) [default: 5 min, at least 1 s].
    pub idle: Duration,
    /// At most this many upstream connections per instance; at the bound, the one idle longest
    /// closes [default: 1000].
    pub max_connections: usize,
    /// How long a forwarded call (and opening a connection) may take before the client is
    /// told the server is not answering [default: 60 s, at least 1 s].
    pub call_timeout: Duration,
    /// How long a server's question asked mid-call waits for a 2026-07-28 client's retry
    /// before the server is answered `cancel` (`crate::mcp::gateway::forward::flights`)
    /// [default: 2 min, at least 1 s].
    pub question_wait: Duration,
    /// A server's tools, prompts and resources are read again after this long, over a user's
    /// open connection to it: a stateless 2026-07-28 server cannot say its lists changed, and a
    /// 2025-11-25 server says so only on a connection that is open
    /// (`crate::mcp::gateway::catalogue::reread`) [default: 5 min, at least 1 s].
    pub list_refresh: Duration,
    /// Where the other instances reach this one (scheme, host and port; e.g.
    /// `http://10.0.0.7:8080`): a 2026-07-28 client's answer to a server's question that reaches
    /// another instance is passed on to the instance whose call waits for it
    /// (`crate::mcp::gateway::forward::flight_home`) [default: `http://{listen}` as bound, unless
    /// `listen` is an unspecified address such as 0.0.0.0 (it names no one host), or a loopback
    /// one while `public_url` is not on this machine (another host's 127.0.0.1 is another
    /// process): then such an answer is told to send the request again].
    pub instance_url: Option<url::Url>,
}

impl Default for GatewaySettings {
    fn default() -> Self {
        Self {
            idle: Duration::from_secs(300),
            max_connections: 1000,
            call_timeout: Duration::from_secs(60),
            question_wait: Duration::from_secs(120),
            list_refresh: Duration::from_secs(300),
            instance_url: None,
        }
    }
}

impl GatewaySettings {
    pub fn resolve(file: GatewayFile) -> anyhow::Result<Self> {
        let base = Self::default();
        let at_least_a_second = |name: &str, value: Option<Duration>, default: Duration| match value {
            Some(d) if d < Duration::from_secs(1) => bail!("gateway.{name} must be at least 1s"),
            Some(d) => Ok(d),
            None => Ok(default),
        };
        let max_connections = match file.max_connections {
            Some(0) => bail!("gateway.max_connections must be at least 1"),
            Some(n) => n,
            None => base.max_connections,
        };
        let instance_url = file.instance_url.as_deref().map(parse_instance_url).transpose()?;
        Ok(Self {
            instance_url,
            idle: at_least_a_second("idle", file.idle, base.idle)?,
            max_connections,
            call_timeout: at_least_a_second("call_timeout", file.call_timeout, base.call_timeout)?,
            question_wait: at_least_a_second("question_wait", file.question_wait, base.question_wait)?,
            list_refresh: at_least_a_second("list_refresh", file.list_refresh, base.list_refresh)?,
        })
    }
}

/// An instance's own address: http or https, a host, nothing but an optional path prefix
/// (no user name or password, no query or fragment: other instances send users' requests to it).
fn parse_instance_url(text: &str) -> anyhow::Result<url::Url> {
    let url = url::Url::parse(text).map_err(|e| anyhow::anyhow!("gateway.instance_url {text:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        bail!("gateway.instance_url must be an http or https URL with a host, e.g. http://10.0.0.7:8080");
    }
    if !url.username().is_empty() || url.password().is_some() || url.query().is_some() || url.fragment().is_some() {
        bail!("gateway.instance_url must hold no user name, password, query or fragment");
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<GatewaySettings> {
        #[derive(Deserialize)]
        struct File {
            #[serde(default)]
            gateway: GatewayFile,
        }
        GatewaySettings::resolve(toml::from_str::<File>(text)?.gateway)
    }

    #[test]
    fn gateway_settings_have_defaults_and_refuse_nonsense() {
        assert_eq!(parse("").unwrap(), GatewaySettings::default());
        let set =
            parse("[gateway]\nidle = \"30s\"\nmax_connections = 5\ncall_timeout = \"2s\"\nquestion_wait = \"3s\"\nlist_refresh = \"1m\"\n")
                .unwrap();
        assert_eq!(
            set,
            GatewaySettings {
                idle: Duration::from_secs(30),
                max_connections: 5,
                call_timeout: Duration::from_secs(2),
                question_wait: Duration::from_secs(3),
                list_refresh: Duration::from_secs(60),
                instance_url: None,
            }
        );
        let url = parse("[gateway]\ninstance_url = \"http://10.0.0.7:8080\"\n").unwrap().instance_url.unwrap();
        assert_eq!(url.as_str(), "http://10.0.0.7:8080/");
        for bad in ["10.0.0.7:8080", "ftp://10.0.0.7", "http://user:pw@10.0.0.7", "http://10.0.0.7/?a=1", "not a url"] {
            let error = parse(&format!("[gateway]\ninstance_url = \"{bad}\"\n")).unwrap_err().to_string();
            assert!(error.contains("gateway.instance_url"), "{bad}: {error}");
        }
        assert!(parse("[gateway]\nquestion_wait = \"0s\"\n").unwrap_err().to_string().contains("at least 1s"));
        assert!(parse("[gateway]\nlist_refresh = \"500ms\"\n").unwrap_err().to_string().contains("at least 1s"));
        assert!(parse("[gateway]\nmax_connections = 0\n").unwrap_err().to_string().contains("at least 1"));
        assert!(parse("[gateway]\ncall_timeout = \"10ms\"\n").unwrap_err().to_string().contains("at least 1s"));
        assert!(parse("[gateway]\nidel = \"1m\"\n").is_err(), "a misspelt setting is refused");
    }
}
