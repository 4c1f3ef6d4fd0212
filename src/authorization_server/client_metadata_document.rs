//! Client ID metadata documents (MCP 2025-11-25 basic/authorization §Client ID Metadata
//! Documents, SEP-991; draft-ietf-oauth-client-id-metadata-document): a client whose `client_id`
//! is an https URL needs no registration — the JSON document served at that URL is its RFC 7591
//! metadata, and must name the same `client_id`, its `redirect_uris` and a `client_name`.
//!
//! Fetching a URL chosen by whoever calls `/authorize` is an SSRF risk, so (MCP security best
//! practices §SSRF, RFC 9728 §7.7):
//! - https only; the URL must be in normalised form with a non-root path, no fragment and no
//!   user info; IP-literal hosts must be public (no private, loopback, link-local, CGNAT,
//!   multicast, documentation or reserved ranges) and `localhost` names are refused;
//! - host names are resolved by [`PublicOnlyResolver`], which drops every non-public address
//!   *at connection time*, so a name that resolves (or rebinds) to an internal address cannot be
//!   reached. Caveat: an https proxy from the environment would resolve names itself, so the
//!   client is built with `no_proxy()`;
//! - redirects are not followed, the whole fetch has a 5 s timeout, and bodies over 16 KiB are
//!   refused;
//! - a valid document is cached for 5 minutes (per running app), so `/authorize` and its consent
//!   POST fetch it once.
//!
//! Tests serve documents from a plain-http loopback server, which every rule above refuses; a test
//! harness opts one port in with [`testing::allow_plain_http_on_loopback_port`]. Nothing in the
//! broker calls it, so the allowance is empty (off) in production.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use url::{Host, Url};

use super::client::{AuthMethod, Client, ClientMetadataInput, ClientSource, MetadataContext, validate_metadata};
use crate::clock::Timestamp;
use crate::config::Config;
use crate::state::AppState;

/// How long a fetched document is trusted before it is fetched again.
pub const CACHE_TTL_SECS: i64 = 300;
/// Larger documents are refused.
pub const MAX_DOCUMENT_BYTES: usize = 16 * 1024;
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Above this many cached documents, expired ones are swept; when still full, nothing is added.
const MAX_CACHE_ENTRIES: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    #[error("the client_id URL is not acceptable: {0}")]
    BadUrl(&'static str),
    #[error("the client metadata document could not be fetched: {0}")]
    Fetch(String),
    #[error("the client metadata document is not valid: {0}")]
    Invalid(&'static str),
}

/// Whether `client_id` names a metadata document (rather than a registered client).
pub fn is_document_client_id(client_id: &str) -> bool {
    client_id.starts_with("https://") || testing::allows(client_id)
}

/// The URL to fetch, if `client_id` is an acceptable document URL.
pub fn check_url(client_id: &str) -> Result<Url, DocumentError> {
    let url = Url::parse(client_id).map_err(|_| DocumentError::BadUrl("not a URL"))?;
    // The identifier is compared as a string everywhere, so it must already be normalised
    // (no dot segments, lower-case host, no default port, …).
    if url.as_str() != client_id {
        return Err(DocumentError::BadUrl("it is not in normalised form"));
    }
    if url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
        return Err(DocumentError::BadUrl("it has a fragment or user information"));
    }
    if url.path() == "/" {
        return Err(DocumentError::BadUrl("it has no path"));
    }
    if testing::allows(client_id) {
        return Ok(url);
    }
    if url.scheme() != "https" {
        return Err(DocumentError::BadUrl("it is not https"));
    }
    match url.host() {
        Some(Host::Domain(domain)) if domain != "localhost" && !domain.ends_with(".localhost") => Ok(url),
        Some(Host::Ipv4(ip)) if is_public(IpAddr::V4(ip)) => Ok(url),
        Some(Host::Ipv6(ip)) if is_public(IpAddr::V6(ip)) => Ok(url),
        _ => Err(DocumentError::BadUrl("its host is local or private")),
    }
}

/// Parses and checks a fetched document for `client_id`.
pub fn parse_document(body: &[u8], client_id: &str, config: &Config) -> Result<Client, DocumentError> {
    let input: ClientMetadataInput = serde_json::from_slice(body)
        .map_err(|_| DocumentError::Invalid("it is not a JSON object with the expected members"))?;
    if input.client_id.as_deref() != Some(client_id) {
        return Err(DocumentError::Invalid("its client_id is not the URL it was fetched from"));
    }
    let metadata = validate_metadata(&input, config, MetadataContext::Document)
        .map_err(|error| DocumentError::Invalid(error.description()))?;
    Ok(Client {
        client_id: client_id.to_owned(),
        refresh_allowed: metadata.refresh_allowed(),
        client_name: metadata.client_name,
        redirect_uris: metadata.redirect_uris,
        scope: metadata.scope,
        auth_method: AuthMethod::None,
        secret_hash: None,
        source: ClientSource::MetadataDocument,
    })
}

/// Documents fetched recently, by URL.
#[derive(Debug, Default)]
pub struct DocumentCache {
    entries: Mutex<HashMap<String, (Timestamp, Client)>>,
}

impl DocumentCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// The client described by the document at `client_id`, from the cache or fetched now.
    pub async fn resolve(&self, state: &AppState, client_id: &str) -> Result<Client, DocumentError> {
        let now = state.core.now();
        if let Some(client) = self.cached(client_id, now) {
            return Ok(client);
        }
        let url = check_url(client_id)?;
        let body = fetch(&url).await?;
        let client = parse_document(&body, client_id, &state.core.config)?;
        tracing::info!(client_id, "client metadata document fetched");
        self.store(client_id, now, client.clone());
        Ok(client)
    }

    fn cached(&self, client_id: &str, now: Timestamp) -> Option<Client> {
        let entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        entries.get(client_id).filter(|(until, _)| *until > now).map(|(_, client)| client.clone())
    }

    fn store(&self, client_id: &str, now: Timestamp, client: Client) {
        let mut entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if entries.len() >= MAX_CACHE_ENTRIES {
            entries.retain(|_, (expires, _)| *expires > now);
        }
        if entries.len() < MAX_CACHE_ENTRIES {
            entries.insert(client_id.to_owned(), (now + CACHE_TTL_SECS, client));
        }
    }
}

/// GET the document: no redirects, bounded time and size.
async fn fetch(url: &Url) -> Result<Vec<u8>, DocumentError> {
    let client = if testing::allows(url.as_str()) { loopback_client() } else { guarded_client() };
    let client = client.ok_or_else(|| DocumentError::Fetch("no HTTP client is available".into()))?;
    let mut response =
        client.get(url.clone()).header(reqwest::header::ACCEPT, "application/json").send().await.map_err(|error| {
            tracing::info!(%error, client_id = %url, "client metadata document fetch failed");
            DocumentError::Fetch("its host could not be reached".into())
        })?;
    if response.status() != reqwest::StatusCode::OK {
        let status = response.status().as_u16();
        return Err(DocumentError::Fetch(if (300..400).contains(&status) {
            "its host answered with a redirect, which is not followed".into()
        } else {
            format!("its host answered with HTTP status {status}")
        }));
    }
    let too_large = || DocumentError::Fetch("the document is larger than 16 KiB".into());
    if response.content_length().is_some_and(|len| len > MAX_DOCUMENT_BYTES as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                    return Err(too_large());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(error) => {
                tracing::info!(%error, client_id = %url, "client metadata document read failed");
                return Err(DocumentError::Fetch("reading the document failed or timed out".into()));
            }
        }
    }
}

fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(FETCH_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("oauth-broker/", env!("CARGO_PKG_VERSION")))
}

/// The production client: https only, names resolved to public addresses only.
fn guarded_client() -> Option<&'static reqwest::Client> {
    static CLIENT: OnceLock<Option<reqwest::Client>> = OnceLock::new();
    CLIENT.get_or_init(|| builder().https_only(true).dns_resolver(PublicOnlyResolver).build().ok()).as_ref()
}

/// For [`testing`] origins only (plain http to 127.0.0.1).
fn loopback_client() -> Option<&'static reqwest::Client> {
    static CLIENT: OnceLock<Option<reqwest::Client>> = OnceLock::new();
    CLIENT.get_or_init(|| builder().build().ok()).as_ref()
}

// Shared with the webhook delivery (src/events/webhooks): one definition of "public".
pub use crate::net::public::{PublicOnlyResolver, is_public};

/// The test-only allowance for plain-http documents on loopback. Off unless a test calls
/// [`testing::allow_plain_http_on_loopback_port`]; the broker itself never does.
pub mod testing {
    use std::collections::BTreeSet;
    use std::sync::Mutex;

    static PORTS: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

    /// Lets client IDs of the form `http://127.0.0.1:{port}/…` be fetched (a local test
    /// server). For test harnesses only.
    #[doc(hidden)]
    pub fn allow_plain_http_on_loopback_port(port: u16) {
        PORTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(port);
    }

    pub(super) fn allows(client_id: &str) -> bool {
        let Ok(url) = url::Url::parse(client_id) else { return false };
        let Some(port) = url.port() else { return false };
        url.scheme() == "http"
            && url.host() == Some(url::Host::Ipv4(std::net::Ipv4Addr::LOCALHOST))
            && PORTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).contains(&port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SettingsArgs;

    #[test]
    fn only_normalised_https_urls_with_a_path_and_a_public_host_are_fetched() {
        assert!(check_url("https://app.example/oauth/client.json").is_ok());
        assert!(check_url("https://93.184.216.34/client.json").is_ok());
        for bad in [
            "http://app.example/client.json",
            "https://app.example",
            "https://app.example/",
            "https://APP.example/client.json",
            "https://app.example:443/client.json",
            "https://app.example/a/../client.json",
            "https://app.example/client.json#x",
            "https://u:p@app.example/client.json",
            "https://localhost/client.json",
            "https://x.localhost/client.json",
            "https://127.0.0.1/client.json",
            "https://10.0.0.5/client.json",
            "https://169.254.169.254/latest/meta-data",
            "https://[::1]/client.json",
            "https://[fd00::1]/client.json",
            "https://[::ffff:192.168.0.1]/client.json",
            "http://127.0.0.1:9/client.json",
        ] {
            assert!(check_url(bad).is_err(), "{bad} must be refused");
        }
    }

    #[test]
    fn non_public_addresses_are_recognised() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "fe80::1",
            "fc00::1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "2001:db8::1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "64:ff9b::101:101"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn a_document_must_name_its_own_url_and_be_valid_metadata() {
        let config = Config::from_toml(&SettingsArgs::default(), "").unwrap();
        let id = "https://app.example/client.json";
        let good = serde_json::json!({"client_id": id, "client_name": "Tool", "redirect_uris": ["http://127.0.0.1:7/cb"],
            "grant_types": ["authorization_code", "refresh_token"]});
        let client = parse_document(good.to_string().as_bytes(), id, &config).unwrap();
        assert_eq!(client.source, ClientSource::MetadataDocument);
        assert!(client.refresh_allowed);
        assert_eq!(client.client_name.as_deref(), Some("Tool"));

        let mut other = good.clone();
        other["client_id"] = "https://evil.example/client.json".into();
        assert!(matches!(parse_document(other.to_string().as_bytes(), id, &config), Err(DocumentError::Invalid(_))));
        let mut unnamed = good.clone();
        unnamed.as_object_mut().unwrap().remove("client_name");
        assert!(parse_document(unnamed.to_string().as_bytes(), id, &config).is_err());
        let mut bad_uri = good.clone();
        bad_uri["redirect_uris"] = serde_json::json!(["http://evil.example/cb"]);
        assert!(parse_document(bad_uri.to_string().as_bytes(), id, &config).is_err());
        assert!(parse_document(b"not json", id, &config).is_err());
        assert!(parse_document(b"[1]", id, &config).is_err());
    }

    #[test]
    fn plain_http_loopback_needs_the_explicit_test_allowance() {
        let id = "http://127.0.0.1:1/client.json";
        assert!(!is_document_client_id(id));
        testing::allow_plain_http_on_loopback_port(1);
        assert!(is_document_client_id(id));
        assert!(check_url(id).is_ok());
        assert!(!is_document_client_id("http://127.0.0.1:2/client.json"));
        assert!(!is_document_client_id("http://localhost:1/client.json"));
    }

    #[tokio::test]
    async fn the_guarded_resolver_refuses_names_that_resolve_to_loopback() {
        use reqwest::dns::Resolve;
        let name: reqwest::dns::Name = "localhost".parse().unwrap();
        assert!(PublicOnlyResolver.resolve(name).await.is_err());
    }
}
