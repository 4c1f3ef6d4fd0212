//! Where a webhook may point (MCP security best practices §SSRF, the same rules as client ID
//! metadata documents, `crate::net::public`): https only; no user info or fragment; an IP
//! literal must be public and `localhost` names are refused; a host name is resolved at
//! connection time to public addresses only; redirects are not followed. An operator who
//! sets `[webhooks] allow_private_targets` (tests, closed networks) lifts the address rules
//! and allows plain http on loopback.

use std::net::IpAddr;
use std::time::Duration;

use url::{Host, Url};

use crate::config::webhooks::WebhookSettings;
use crate::net::public::{PublicOnlyResolver, is_public};

/// Why an endpoint is refused, in the operator's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("the webhook URL {0:?} is not an absolute URL")]
    NotAUrl(String),
    #[error("the webhook URL must use https")]
    NotHttps,
    #[error("the webhook URL must not carry user info or a fragment")]
    UserInfoOrFragment,
    #[error(
        "the webhook URL points at a loopback, private or reserved address; only public hosts are allowed \
         (set [webhooks] allow_private_targets = true for a test or closed network)"
    )]
    NotPublic,
}

/// Checks `text` as a webhook endpoint under `settings`.
pub fn check(text: &str, settings: &WebhookSettings) -> Result<Url, EndpointError> {
    let url = Url::parse(text.trim()).map_err(|_| EndpointError::NotAUrl(text.to_owned()))?;
    if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
        return Err(EndpointError::UserInfoOrFragment);
    }
    let private_allowed = settings.allow_private_targets;
    match url.scheme() {
        "https" => {}
        "http" if private_allowed && crate::net::is_loopback(&url) => {}
        _ => return Err(EndpointError::NotHttps),
    }
    if private_allowed {
        return Ok(url);
    }
    match url.host() {
        Some(Host::Domain(domain)) if domain != "localhost" && !domain.ends_with(".localhost") => Ok(url),
        Some(Host::Ipv4(ip)) if is_public(IpAddr::V4(ip)) => Ok(url),
        Some(Host::Ipv6(ip)) if is_public(IpAddr::V6(ip)) => Ok(url),
        _ => Err(EndpointError::NotPublic),
    }
}

/// The client deliveries go out with: no redirects, no proxy (a proxy would resolve names
/// itself), the attempt's bound, and — unless private targets are allowed — https only and
/// public addresses only.
pub fn client(settings: &WebhookSettings) -> reqwest::Client {
    let builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(settings.timeout)
        .connect_timeout(settings.timeout.min(Duration::from_secs(5)))
        .user_agent(concat!("oauth-broker-webhooks/", env!("CARGO_PKG_VERSION")));
    let builder = match settings.allow_private_targets {
        true => builder,
        false => builder.https_only(true).dns_resolver(PublicOnlyResolver),
    };
    builder.build().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_https_endpoints_pass_by_default() {
        let strict = WebhookSettings::default();
        assert!(check("https://hooks.example.com/broker", &strict).is_ok());
        for (bad, why) in [
            ("http://hooks.example.com/x", EndpointError::NotHttps),
            ("ftp://hooks.example.com/x", EndpointError::NotHttps),
            ("https://127.0.0.1/x", EndpointError::NotPublic),
            ("https://10.1.2.3/x", EndpointError::NotPublic),
            ("https://169.254.169.254/latest", EndpointError::NotPublic),
            ("https://[::1]/x", EndpointError::NotPublic),
            ("https://[fd00::1]/x", EndpointError::NotPublic),
            ("https://localhost/x", EndpointError::NotPublic),
            ("https://a.localhost/x", EndpointError::NotPublic),
            ("https://user:pw@hooks.example.com/x", EndpointError::UserInfoOrFragment),
            ("https://hooks.example.com/x#f", EndpointError::UserInfoOrFragment),
        ] {
            assert_eq!(check(bad, &strict).unwrap_err(), why, "{bad}");
        }
        assert!(matches!(check("hooks", &strict), Err(EndpointError::NotAUrl(_))));
    }

    #[test]
    fn the_operator_may_allow_private_targets_and_plain_http_on_loopback_only() {
        let open = WebhookSettings { allow_private_targets: true, ..WebhookSettings::default() };
        assert!(check("http://127.0.0.1:8080/hook", &open).is_ok());
        assert!(check("https://10.1.2.3/x", &open).is_ok());
        assert_eq!(check("http://10.1.2.3/x", &open).unwrap_err(), EndpointError::NotHttps);
    }
}
