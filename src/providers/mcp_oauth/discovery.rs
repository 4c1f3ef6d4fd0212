//! Finding a server's authorization server (MCP 2025-11-25 basic/authorization §Authorization
//! Server Discovery):
//!
//! 1. An unauthenticated `initialize` must be refused with 401; its `WWW-Authenticate: Bearer
//!    resource_metadata="…"` names the protected-resource metadata (RFC 9728 §5.1). Without
//!    that parameter the well-known URIs are tried: the path-inserted one, then the root one
//!    (RFC 9728 §3.1).
//! 2. The metadata's `resource` must be the server's URL or a same-origin prefix of it
//!    (RFC 9728 §3.3, §7.3: otherwise another resource's metadata could be passed off); the
//!    first of its `authorization_servers` is used.
//! 3. The authorization server's metadata, tried in the spec's order: RFC 8414 path-inserted,
//!    OIDC path-inserted, OIDC path-appended. Its `issuer` must be the one asked for (RFC 8414
//!    §3.3, mix-up defence), and it must offer PKCE S256 (the MCP spec forbids going on without).
//!
//! Every URL met on the way is held to the broker's outbound rules ([`crate::net::check_upstream_url`]:
//! https, or plain http on a loopback host — how the tests run), no redirect is followed and
//! answers are bounded in size.

use serde_json::Value;
use url::Url;

/// Larger metadata documents are refused.
const MAX_DOCUMENT_BYTES: usize = 64 * 1024;

/// Why discovery failed, in the operator's words (never a token: none is involved yet).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct DiscoveryError(pub String);

fn fail<T>(message: impl Into<String>) -> Result<T, DiscoveryError> {
    Err(DiscoveryError(message.into()))
}

/// What the server and its authorization server state about themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    pub resource: Url,
    pub issuer: String,
    pub authorization_endpoint: Url,
    pub token_endpoint: Url,
    pub revocation_endpoint: Option<Url>,
    pub registration_endpoint: Option<Url>,
    /// `client_id_metadata_document_supported` (MCP 2025-11-25 §Client ID Metadata Documents).
    pub metadata_documents: bool,
    pub token_auth_methods: Vec<String>,
    pub scopes_supported: Vec<String>,
}

/// Runs the three steps for the server at `server`.
pub async fn discover(http: &reqwest::Client, server: &Url) -> Result<Discovered, DiscoveryError> {
    let named = challenge(http, server).await?;
    let candidates = match named {
        Some(url) => vec![url],
        None => protected_resource_urls(server),
    };
    let mut last = None;
    let mut found = None;
    for url in candidates {
        match fetch_json(http, &url).await {
            Ok(document) => {
                found = Some(document);
                break;
            }
            Err(error) => last = Some(error),
        }
    }
    let Some(resource_metadata) = found else {
        return Err(last.unwrap_or_else(|| DiscoveryError("no protected-resource metadata".into())));
    };
    let resource = check_resource(server, &resource_metadata)?;
    let Some(issuer) =
        resource_metadata["authorization_servers"].as_array().and_then(|a| a.first()).and_then(Value::as_str)
    else {
        return fail("the server's protected-resource metadata names no authorization_servers");
    };
    let issuer_url = outbound(issuer, "its authorization server")?;
    let mut last = None;
    for url in authorization_server_urls(&issuer_url) {
        match fetch_json(http, &url).await {
            Ok(document) => {
                let mut found = read_authorization_server(issuer, &document)?;
                found.resource = resource;
                found.scopes_supported = strings(&resource_metadata["scopes_supported"]);
                if found.scopes_supported.is_empty() {
                    found.scopes_supported = strings(&document["scopes_supported"]);
                }
                return Ok(found);
            }
            Err(error) => last = Some(error),
        }
    }
    Err(last.unwrap_or_else(|| DiscoveryError("no authorization server metadata".into())))
}

/// Asks without a credential; the protected-resource metadata URL from a 401's challenge, or
/// `None` when the challenge does not name one.
async fn challenge(http: &reqwest::Client, server: &Url) -> Result<Option<Url>, DiscoveryError> {
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "oauth-broker", "version": env!("CARGO_PKG_VERSION")}}
    });
    let answer = http
        .post(server.clone())
        .header(reqwest::header::ACCEPT, "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .map_err(|e| {
            DiscoveryError(format!("could not reach the server at {server}: {}", crate::net::request_failure(&e)))
        })?;
    if answer.status() != reqwest::StatusCode::UNAUTHORIZED {
        return fail(format!(
            "the server answered {} without a credential, not 401: it is not protected by MCP authorization \
             (use --auth none, or another --auth)",
            answer.status()
        ));
    }
    let header = answer
        .headers()
        .get_all(reqwest::header::WWW_AUTHENTICATE)
        .iter()
        .find_map(|v| v.to_str().ok().and_then(resource_metadata_param));
    header.map(|url| outbound(&url, "its resource_metadata")).transpose()
}

/// `resource_metadata` from a `Bearer` challenge (RFC 9728 §5.1), quoted or not.
pub fn resource_metadata_param(challenge: &str) -> Option<String> {
    let lower = challenge.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = lower[from..].find("resource_metadata") {
        let start = from + found;
        from = start + "resource_metadata".len();
        // A whole parameter name: preceded by a separator, followed by '='.
        let before = lower[..start].chars().next_back();
        if before.is_some_and(|c| !(c == ' ' || c == ',' || c == '\t')) {
            continue;
        }
        let rest = challenge[from..].trim_start();
        let Some(rest) = rest.strip_prefix('=') else { continue };
        let rest = rest.trim_start();
        return if let Some(quoted) = rest.strip_prefix('"') {
            quoted.find('"').map(|end| quoted[..end].to_owned())
        } else {
            Some(rest.split([',', ' ']).next().unwrap_or_default().to_owned()).filter(|v| !v.is_empty())
        };
    }
    None
}

/// RFC 9728 §3.1: the path-inserted well-known URI, then the root one.
fn protected_resource_urls(server: &Url) -> Vec<Url> {
    well_known(server, "oauth-protected-resource")
}

/// `/.well-known/{suffix}{path}` and, when the path is not empty, `/.well-known/{suffix}`.
fn well_known(base: &Url, suffix: &str) -> Vec<Url> {
    let path = base.path().trim_end_matches('/');
    let mut urls = Vec::new();
    let mut url = base.clone();
    url.set_query(None);
    url.set_path(&format!("/.well-known/{suffix}{path}"));
    urls.push(url.clone());
    if !path.is_empty() {
        url.set_path(&format!("/.well-known/{suffix}"));
        urls.push(url);
    }
    urls
}

/// MCP 2025-11-25 §Authorization Server Metadata Discovery, in its order.
fn authorization_server_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let mut urls = Vec::new();
    let mut url = issuer.clone();
    url.set_query(None);
    url.set_path(&format!("/.well-known/oauth-authorization-server{path}"));
    urls.push(url.clone());
    url.set_path(&format!("/.well-known/openid-configuration{path}"));
    urls.push(url.clone());
    if !path.is_empty() {
        url.set_path(&format!("{path}/.well-known/openid-configuration"));
        urls.push(url);
    }
    urls
}

/// The metadata's `resource`, if it is the server's URL or a same-origin prefix of its path.
fn check_resource(server: &Url, metadata: &Value) -> Result<Url, DiscoveryError> {
    let Some(stated) = metadata["resource"].as_str() else {
        return fail("the server's protected-resource metadata has no resource");
    };
    let resource = outbound(stated, "its resource")?;
    let prefix = resource.path().trim_end_matches('/');
    let path = server.path();
    let within = path == prefix
        || path.trim_end_matches('/') == prefix
        || path.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('/'));
    if resource.origin() != server.origin() || !within || resource.query().is_some() {
        return fail(format!(
            "the server's protected-resource metadata is for {stated}, not for {server}: refused (RFC 9728 §3.3)"
        ));
    }
    Ok(resource)
}

fn read_authorization_server(issuer: &str, document: &Value) -> Result<Discovered, DiscoveryError> {
    let stated = document["issuer"].as_str().unwrap_or_default();
    // RFC 8414 §3.3: identical; a trailing slash is the one difference tolerated, as URL
    // libraries add it to bare origins.
    if stated.trim_end_matches('/') != issuer.trim_end_matches('/') {
        return fail(format!(
            "the authorization server's metadata names issuer {stated:?}, not {issuer:?}: refused (RFC 8414 §3.3)"
        ));
    }
    let endpoint = |field: &str| -> Result<Option<Url>, DiscoveryError> {
        document[field].as_str().map(|u| outbound(u, field)).transpose()
    };
    let Some(authorization_endpoint) = endpoint("authorization_endpoint")? else {
        return fail("the authorization server's metadata has no authorization_endpoint");
    };
    let Some(token_endpoint) = endpoint("token_endpoint")? else {
        return fail("the authorization server's metadata has no token_endpoint");
    };
    if !strings(&document["code_challenge_methods_supported"]).iter().any(|m| m == "S256") {
        return fail(
            "the authorization server does not list S256 in code_challenge_methods_supported; \
             MCP authorization requires PKCE, so the broker will not use it",
        );
    }
    let mut token_auth_methods = strings(&document["token_endpoint_auth_methods_supported"]);
    if token_auth_methods.is_empty() {
        // RFC 8414 §2: the default.
        token_auth_methods.push("client_secret_basic".into());
    }
    Ok(Discovered {
        resource: authorization_endpoint.clone(),
        issuer: stated.to_owned(),
        authorization_endpoint,
        token_endpoint,
        revocation_endpoint: endpoint("revocation_endpoint")?,
        registration_endpoint: endpoint("registration_endpoint")?,
        metadata_documents: document["client_id_metadata_document_supported"].as_bool().unwrap_or(false),
        token_auth_methods,
        scopes_supported: Vec::new(),
    })
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect()).unwrap_or_default()
}

/// `value` as a URL the broker may call, or an error naming `what`.
pub fn outbound(value: &str, what: &str) -> Result<Url, DiscoveryError> {
    let url = Url::parse(value).map_err(|_| DiscoveryError(format!("{what} {value:?} is not an absolute URL")))?;
    crate::net::check_upstream_url(&url).map_err(|why| DiscoveryError(format!("{what} {url} {why}")))?;
    Ok(url)
}

/// A bounded JSON GET; a non-200 answer is an error naming the URL (metadata URLs carry no
/// secret).
pub async fn fetch_json(http: &reqwest::Client, url: &Url) -> Result<Value, DiscoveryError> {
    let answer = http
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| DiscoveryError(format!("could not fetch {url}: {}", crate::net::request_failure(&e))))?;
    if !answer.status().is_success() {
        return fail(format!("{url} answered {}", answer.status()));
    }
    if answer.content_length().is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64) {
        return fail(format!("{url} answered more than {MAX_DOCUMENT_BYTES} bytes"));
    }
    let body = answer
        .bytes()
        .await
        .map_err(|e| DiscoveryError(format!("reading {url}: {}", crate::net::request_failure(&e))))?;
    if body.len() > MAX_DOCUMENT_BYTES {
        return fail(format!("{url} answered more than {MAX_DOCUMENT_BYTES} bytes"));
    }
    let value: Value = serde_json::from_slice(&body).map_err(|_| DiscoveryError(format!("{url} is not JSON")))?;
    if !value.is_object() {
        return fail(format!("{url} is not a JSON object"));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_challenge_names_the_metadata_quoted_or_not() {
        let quoted = r#"Bearer error="invalid_token", resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/mcp""#;
        assert_eq!(
            resource_metadata_param(quoted).as_deref(),
            Some("https://mcp.example/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(
            resource_metadata_param("Bearer resource_metadata=https://a.example/x, scope=y").as_deref(),
            Some("https://a.example/x")
        );
        assert_eq!(resource_metadata_param("Bearer"), None);
        assert_eq!(resource_metadata_param(r#"Bearer x_resource_metadata="https://evil.example""#), None);
    }

    #[test]
    fn well_known_uris_follow_the_specs_order() {
        let server = Url::parse("https://mcp.example/tenant/mcp").unwrap();
        let urls: Vec<String> = protected_resource_urls(&server).iter().map(Url::to_string).collect();
        assert_eq!(
            urls,
            [
                "https://mcp.example/.well-known/oauth-protected-resource/tenant/mcp",
                "https://mcp.example/.well-known/oauth-protected-resource"
            ]
        );
        let issuer = Url::parse("https://as.example/t1").unwrap();
        let urls: Vec<String> = authorization_server_urls(&issuer).iter().map(Url::to_string).collect();
        assert_eq!(
            urls,
            [
                "https://as.example/.well-known/oauth-authorization-server/t1",
                "https://as.example/.well-known/openid-configuration/t1",
                "https://as.example/t1/.well-known/openid-configuration"
            ]
        );
        let root = Url::parse("https://as.example").unwrap();
        assert_eq!(authorization_server_urls(&root).len(), 2);
    }

    #[test]
    fn another_resources_metadata_is_refused() {
        let server = Url::parse("https://mcp.example/mcp").unwrap();
        for good in ["https://mcp.example/mcp", "https://mcp.example/", "https://mcp.example"] {
            assert!(check_resource(&server, &json!({"resource": good})).is_ok(), "{good}");
        }
        for bad in [
            "https://evil.example/mcp",
            "https://mcp.example/other",
            "https://mcp.example/mc",
            "http://mcp.example/mcp",
        ] {
            assert!(check_resource(&server, &json!({"resource": bad})).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_authorization_server_must_be_the_issuer_asked_for_and_offer_s256() {
        let good = json!({
            "issuer": "https://as.example",
            "authorization_endpoint": "https://as.example/authorize",
            "token_endpoint": "https://as.example/token",
            "code_challenge_methods_supported": ["S256"],
            "client_id_metadata_document_supported": true,
        });
        let found = read_authorization_server("https://as.example/", &good).unwrap();
        assert!(found.metadata_documents);
        assert_eq!(found.token_auth_methods, ["client_secret_basic"]);
        let mut other = good.clone();
        other["issuer"] = json!("https://evil.example");
        assert!(read_authorization_server("https://as.example", &other).is_err());
        let mut plain = good.clone();
        plain["code_challenge_methods_supported"] = json!(["plain"]);
        assert!(read_authorization_server("https://as.example", &plain).is_err());
        let mut insecure = good;
        insecure["token_endpoint"] = json!("http://as.example/token");
        assert!(read_authorization_server("https://as.example", &insecure).is_err());
    }
}
