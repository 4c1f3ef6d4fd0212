//! Outbound HTTP to the issuer: no redirects (a metadata or key URL that redirects is
//! misconfigured or hostile, and following it would let it point us anywhere), short timeouts,
//! and a cap on how much of a response we read.

use std::time::Duration;

use oauth2::{HttpRequest, HttpResponse};
use serde::de::DeserializeOwned;
use url::Url;

use super::oidc_error::OidcError;

/// The issuer client. Separate from the provider client: tighter timeouts, since a bearer
/// request may wait on a key refresh.
pub fn http_client() -> Result<reqwest::Client, OidcError> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .user_agent(concat!("oauth-broker/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| OidcError::Unavailable(format!("building the HTTP client: {e}")))
}

/// GET `url` as JSON, reading at most `cap` bytes.
pub async fn get_json<T: DeserializeOwned>(http: &reqwest::Client, url: &Url, cap: usize) -> Result<T, OidcError> {
    let response = http
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| OidcError::Unavailable(format!("GET {url}: {}", crate::net::request_failure(&e))))?;
    let status = response.status();
    if !status.is_success() {
        let error = format!("GET {url} answered {status}");
        return Err(if status.is_server_error() || status.as_u16() == 429 {
            OidcError::Unavailable(error)
        } else {
            OidcError::BadIssuerResponse(error)
        });
    }
    let body = read_capped(response, cap).await?;
    serde_json::from_slice(&body)
        .map_err(|e| OidcError::BadIssuerResponse(format!("GET {url}: not the JSON expected: {e}")))
}

async fn read_capped(mut response: reqwest::Response, cap: usize) -> Result<Vec<u8>, OidcError> {
    if response.content_length().is_some_and(|n| n > cap as u64) {
        return Err(OidcError::BadIssuerResponse(format!("response larger than {cap} bytes")));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| OidcError::Unavailable(format!("reading a response: {}", crate::net::request_failure(&e))))?
    {
        if body.len() + chunk.len() > cap {
            return Err(OidcError::BadIssuerResponse(format!("response larger than {cap} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SendError(pub String);

/// Token responses (with an ID token) are small; 64 KiB is generous.
const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;

/// Adapts our client to the `oauth2` crate's request/response types, with the size cap.
pub fn sender(
    http: &reqwest::Client,
) -> impl Fn(HttpRequest) -> std::pin::Pin<Box<dyn Future<Output = Result<HttpResponse, SendError>> + Send>> + '_ {
    move |request: HttpRequest| {
        let http = http.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let response = http
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .body(body)
                .send()
                .await
                .map_err(|e| SendError(crate::net::request_failure(&e).into()))?;
            let status = response.status();
            if status.is_server_error() || status.as_u16() == 429 {
                return Err(SendError(format!("the token endpoint answered {status}")));
            }
            let headers = response.headers().clone();
            let bytes = read_capped(response, MAX_TOKEN_RESPONSE_BYTES).await.map_err(|e| SendError(e.to_string()))?;
            let mut out = http::Response::builder().status(status);
            if let Some(h) = out.headers_mut() {
                *h = headers;
            }
            out.body(bytes).map_err(|e| SendError(e.to_string()))
        })
    }
}
