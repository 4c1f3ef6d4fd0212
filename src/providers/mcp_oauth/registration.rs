//! How the broker becomes a client of a server's authorization server (MCP 2025-11-25
//! basic/authorization §Client Registration Approaches, in the spec's order of preference):
//!
//! 1. the operator's own credentials, when given (`--client-id`, the secret sealed);
//! 2. a client ID metadata document: the `client_id` is the URL of a document the broker
//!    serves (`/oauth/client-metadata/{provider}`), where the authorization server advertises
//!    `client_id_metadata_document_supported` and the broker's public URL is https (the
//!    document's URL must be, for the authorization server to fetch it);
//! 3. RFC 7591 dynamic registration at its `registration_endpoint`, as a confidential client
//!    when it offers secret-based authentication (the broker keeps secrets sealed), public
//!    otherwise.

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use url::Url;

use super::discovery::{Discovered, DiscoveryError};
use super::settings::{RegistrationKind, StoredAuthMethod};

/// Largest registration answer read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// What the broker says about itself when it registers.
pub struct BrokerClient {
    pub client_name: String,
    /// Where the authorization server sends the browser back (the provider's own callback).
    pub redirect_uri: Url,
    /// The document URL to use as `client_id`, when the broker can serve one over https.
    pub metadata_document: Option<Url>,
}

/// The registration to store.
pub struct Registered {
    pub kind: RegistrationKind,
    pub client_id: String,
    pub client_secret: Option<SecretString>,
    pub auth_method: StoredAuthMethod,
}

impl std::fmt::Debug for Registered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registered").field("kind", &self.kind).field("client_id", &self.client_id).finish()
    }
}

/// The client ID metadata document for `client_id` (RFC 7591 §2 fields; the document names its
/// own URL as `client_id`).
pub fn metadata_document(client_id: &Url, client: &BrokerClient) -> Value {
    json!({
        "client_id": client_id.as_str(),
        "client_name": client.client_name,
        "redirect_uris": [client.redirect_uri.as_str()],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    })
}

/// The operator's credentials: a secret goes the way the authorization server prefers.
pub fn operator(discovered: &Discovered, client_id: String, client_secret: Option<SecretString>) -> Registered {
    let auth_method = match &client_secret {
        None => StoredAuthMethod::None,
        Some(_) if discovered.token_auth_methods.iter().any(|m| m == "client_secret_basic") => {
            StoredAuthMethod::ClientSecretBasic
        }
        Some(_) => StoredAuthMethod::ClientSecretPost,
    };
    Registered { kind: RegistrationKind::Operator, client_id, client_secret, auth_method }
}

/// A client ID metadata document where possible, else dynamic registration.
pub async fn automatic(
    http: &reqwest::Client,
    discovered: &Discovered,
    client: &BrokerClient,
) -> Result<Registered, DiscoveryError> {
    if discovered.metadata_documents
        && let Some(url) = &client.metadata_document
    {
        return Ok(Registered {
            kind: RegistrationKind::MetadataDocument,
            client_id: url.to_string(),
            client_secret: None,
            auth_method: StoredAuthMethod::None,
        });
    }
    let Some(endpoint) = &discovered.registration_endpoint else {
        return Err(DiscoveryError(
            "the authorization server offers no dynamic registration (and no client ID metadata documents the \
             broker can use: those need an https public URL); register the broker there and give \
             --client-id (and --client-secret-env)"
                .into(),
        ));
    };
    let method = ["client_secret_basic", "client_secret_post"]
        .into_iter()
        .find(|m| discovered.token_auth_methods.iter().any(|offered| offered == m))
        .unwrap_or("none");
    let request = json!({
        "client_name": client.client_name,
        "redirect_uris": [client.redirect_uri.as_str()],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
    });
    let answer = http
        .post(endpoint.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .json(&request)
        .send()
        .await
        .map_err(|_| DiscoveryError(format!("could not reach the registration endpoint {endpoint}")))?;
    let status = answer.status();
    let body = answer.bytes().await.map_err(|_| DiscoveryError(format!("reading the answer of {endpoint}")))?;
    if body.len() > MAX_ANSWER_BYTES {
        return Err(DiscoveryError(format!("{endpoint} answered more than {MAX_ANSWER_BYTES} bytes")));
    }
    let answer: Value = serde_json::from_slice(&body).unwrap_or_default();
    if !status.is_success() {
        // RFC 7591 §3.2.2: the error and its description are meant to be shown.
        let error = answer["error"].as_str().unwrap_or("no error code");
        let description = answer["error_description"].as_str().unwrap_or_default();
        return Err(DiscoveryError(format!(
            "dynamic registration at {endpoint} was refused ({status}): {error} {description}"
        )));
    }
    read_registration(&answer, method).ok_or_else(|| {
        DiscoveryError(format!("dynamic registration at {endpoint} answered without a usable client_id"))
    })
}

/// RFC 7591 §3.2.1: the issued `client_id`, a secret if one was issued, and the method the
/// server settled on.
fn read_registration(answer: &Value, asked: &str) -> Option<Registered> {
    let client_id = answer["client_id"].as_str().filter(|id| !id.is_empty())?.to_owned();
    let client_secret =
        answer["client_secret"].as_str().filter(|s| !s.is_empty()).map(|s| SecretString::from(s.to_owned()));
    let settled = answer["token_endpoint_auth_method"].as_str().unwrap_or(asked);
    let auth_method = match (settled, &client_secret) {
        ("client_secret_basic", Some(_)) => StoredAuthMethod::ClientSecretBasic,
        ("client_secret_post", Some(_)) => StoredAuthMethod::ClientSecretPost,
        ("none", _) => StoredAuthMethod::None,
        // A secret-based method without a secret (or an unknown method) cannot be used.
        _ => return None,
    };
    Some(Registered { kind: RegistrationKind::Dynamic, client_id, client_secret, auth_method })
}

/// Whether `secret` is acceptable as an operator's client secret.
pub fn check_secret(secret: &SecretString) -> Result<(), DiscoveryError> {
    let value = secret.expose_secret();
    if value.is_empty() || value.len() > 4096 || value.chars().any(char::is_control) {
        return Err(DiscoveryError("the client secret is empty, too long or has control characters".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn discovered(methods: &[&str], documents: bool) -> Discovered {
        let url = Url::parse("https://as.example/x").unwrap();
        Discovered {
            resource: url.clone(),
            issuer: "https://as.example".into(),
            authorization_endpoint: url.clone(),
            token_endpoint: url.clone(),
            revocation_endpoint: None,
            registration_endpoint: None,
            metadata_documents: documents,
            token_auth_methods: methods.iter().map(|m| m.to_string()).collect(),
            scopes_supported: Vec::new(),
        }
    }

    fn broker(document: bool) -> BrokerClient {
        BrokerClient {
            client_name: "oauth-broker".into(),
            redirect_uri: Url::parse("https://broker.example/oauth/callback/mcp-notes").unwrap(),
            metadata_document: document
                .then(|| Url::parse("https://broker.example/oauth/client-metadata/mcp-notes").unwrap()),
        }
    }

    #[tokio::test]
    async fn a_metadata_document_is_used_only_where_advertised_and_servable() {
        let http = reqwest::Client::new();
        let chosen = automatic(&http, &discovered(&["none"], true), &broker(true)).await.unwrap();
        assert_eq!(chosen.kind, RegistrationKind::MetadataDocument);
        assert_eq!(chosen.client_id, "https://broker.example/oauth/client-metadata/mcp-notes");
        // Not servable (http public URL) and no registration endpoint: the operator is told what to do.
        let error = automatic(&http, &discovered(&["none"], true), &broker(false)).await.unwrap_err();
        assert!(error.0.contains("--client-id"), "{error}");
        let doc = metadata_document(&Url::parse(&chosen.client_id).unwrap(), &broker(true));
        assert_eq!(doc["client_id"], chosen.client_id.as_str());
        assert_eq!(doc["redirect_uris"][0], "https://broker.example/oauth/callback/mcp-notes");
    }

    #[test]
    fn a_registration_answer_must_be_usable() {
        let ok = read_registration(&json!({"client_id": "c", "client_secret": "s"}), "client_secret_basic").unwrap();
        assert_eq!(ok.auth_method, StoredAuthMethod::ClientSecretBasic);
        let public =
            read_registration(&json!({"client_id": "c", "token_endpoint_auth_method": "none"}), "client_secret_basic")
                .unwrap();
        assert_eq!(public.auth_method, StoredAuthMethod::None);
        assert!(read_registration(&json!({"client_id": "c"}), "client_secret_post").is_none(), "no secret");
        assert!(read_registration(&json!({"client_secret": "s"}), "none").is_none());
        let operator =
            operator(&discovered(&["client_secret_post"], false), "id".into(), Some(SecretString::from("s")));
        assert_eq!(operator.auth_method, StoredAuthMethod::ClientSecretPost);
    }
}
