//! What the token endpoint (RFC 6749 §3.2) and the revocation endpoint (RFC 7009 §2.1) do
//! before and after the server's own work: read the body, require a form, parse it,
//! authenticate the client (parsed here, checked by the server), refuse repeated parameters,
//! and answer without caching. The order is deliberate: a client that fails to authenticate
//! learns nothing about the rest of its request.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::oauth_error::{OAuthError, no_store};
use super::params::{Params, is_form};
use super::presented_client::{PresentedClient, presented_client};
use crate::pkce;

/// A well-formed token request from an authenticated client, no parameter repeated.
#[derive(Debug)]
pub struct TokenRequest {
    /// As the server's check returned it.
    pub client_id: String,
    pub params: Params,
}

impl TokenRequest {
    /// The `grant_type` to dispatch on (RFC 6749 §4.1.3, §6); a server answers one it does not
    /// support with [`OAuthError::UnsupportedGrantType`].
    pub fn grant_type(&self) -> Result<&str, OAuthError> {
        self.params.get("grant_type").ok_or(OAuthError::InvalidRequest("grant_type is required"))
    }
}

/// RFC 6749 §4.1.3 and RFC 7636 §4.6: a code is redeemed only with the `redirect_uri` of its
/// authorization request (present and identical) and the verifier of its S256 challenge.
pub fn check_code_binding(params: &Params, redirect_uri: &str, code_challenge: &str) -> Result<(), OAuthError> {
    if params.get("redirect_uri") != Some(redirect_uri) {
        return Err(OAuthError::InvalidGrant);
    }
    let verifier = params.get("code_verifier").ok_or(OAuthError::InvalidGrant)?;
    if pkce::verify(verifier, code_challenge) { Ok(()) } else { Err(OAuthError::InvalidGrant) }
}

/// RFC 6749 §3.2: checks the request, hands it to the server's `grant` (which dispatches on
/// [`TokenRequest::grant_type`]) and answers with the tokens as JSON (§5.1) or the error (§5.2).
pub async fn token<S, T: Serialize>(
    realm: &'static str,
    state: &S,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    verify: impl AsyncFnOnce(&S, PresentedClient) -> Result<String, OAuthError>,
    grant: impl AsyncFnOnce(&S, TokenRequest) -> Result<T, OAuthError>,
) -> Response {
    let result = match client_request(state, headers, body, verify).await {
        Ok(request) => grant(state, request).await,
        Err(error) => Err(error),
    };
    respond(realm, result.map(Json))
}

/// RFC 7009 §2.1: the token a client asks to have revoked.
#[derive(Debug)]
pub struct RevocationRequest {
    /// The authenticated client; only its own tokens may be revoked.
    pub client_id: String,
    /// `token_type_hint` is not passed on: it may only order the look-ups (§2.1), and a wrong
    /// hint must not stop the revocation.
    pub token: String,
}

/// RFC 7009 §2.1–§2.2: checks the request, hands it to the server's `revoke` and answers 200
/// with no body — also for a token that is unknown or not the client's, which `revoke` leaves
/// alone without an error.
pub async fn revocation<S>(
    realm: &'static str,
    state: &S,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    verify: impl AsyncFnOnce(&S, PresentedClient) -> Result<String, OAuthError>,
    revoke: impl AsyncFnOnce(&S, RevocationRequest) -> Result<(), OAuthError>,
) -> Response {
    let result = match client_request(state, headers, body, verify).await {
        Ok(request) => match request.params.get("token") {
            Some(token) => {
                revoke(state, RevocationRequest { token: token.to_owned(), client_id: request.client_id }).await
            }
            None => Err(OAuthError::InvalidRequest("token is required")),
        },
        Err(error) => Err(error),
    };
    respond(realm, result.map(|()| StatusCode::OK))
}

/// Reads the body, requires a form, parses it, has `verify` (the server's look-up of the
/// presented client) authenticate the client, then refuses repeated parameters.
async fn client_request<S>(
    state: &S,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    verify: impl AsyncFnOnce(&S, PresentedClient) -> Result<String, OAuthError>,
) -> Result<TokenRequest, OAuthError> {
    let Ok(body) = body else {
        return Err(OAuthError::InvalidRequest("the body could not be read or is too large"));
    };
    if !is_form(headers) {
        return Err(OAuthError::InvalidRequest("the body must be application/x-www-form-urlencoded"));
    }
    let params = Params::parse(&body);
    let client_id = verify(state, presented_client(headers, &params)?).await?;
    if params.has_duplicates() {
        return Err(OAuthError::InvalidRequest("a parameter was sent more than once"));
    }
    Ok(TokenRequest { client_id, params })
}

/// The answer or the error as the server of `realm` words it; never cached (RFC 6749 §5.1).
fn respond(realm: &'static str, result: Result<impl IntoResponse, OAuthError>) -> Response {
    match result {
        Ok(answer) => {
            let mut response = answer.into_response();
            no_store(&mut response);
            response
        }
        Err(error) => error.into_response_for(realm),
    }
}
