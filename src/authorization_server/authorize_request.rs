//! An authorization request checked from scratch (OAuth 2.1 §4.1.1, RFC 7636, RFC 8707): the
//! client and the exact redirect URI first, whose failures are pages and never redirects (RFC
//! 6749 §4.1.2.1; no open redirector), then everything else, whose failures go back to that
//! redirect URI. Only a request that passed every check ([`AuthorizeRequest`]) is shown or
//! turned into a code.

use std::collections::BTreeSet;

use axum::http::StatusCode;

use super::client::Client;
use super::client_metadata_document::DocumentCache;
use super::lookup::{self, LookupError};
use super::scopes;
use crate::html::PageError;
use crate::pkce;
use crate::state::AppState;
use crate::token_endpoint::params::Params;

/// Longer `state` values are refused (they travel in URLs and hidden fields).
const MAX_STATE_LEN: usize = 1024;

/// A request that passed every check; only this is shown or turned into a code.
#[derive(Debug)]
pub struct AuthorizeRequest {
    pub client: Client,
    pub redirect_uri: String,
    pub state: Option<String>,
    pub code_challenge: String,
    pub scope: BTreeSet<String>,
    pub resource: String,
}

impl AuthorizeRequest {
    /// The request's parameters, as the consent form's hidden fields and for `next`.
    pub(super) fn fields(&self) -> Vec<(&'static str, String)> {
        let mut fields = vec![
            ("response_type", "code".to_owned()),
            ("client_id", self.client.client_id.clone()),
            ("redirect_uri", self.redirect_uri.clone()),
            ("code_challenge", self.code_challenge.clone()),
            ("code_challenge_method", "S256".to_owned()),
            ("resource", self.resource.clone()),
        ];
        if !self.scope.is_empty() {
            fields.push(("scope", scopes::join(&self.scope)));
        }
        if let Some(state) = &self.state {
            fields.push(("state", state.clone()));
        }
        fields
    }

    /// `/authorize?…` with exactly the validated parameters (where sign-in returns to).
    pub(super) fn path(&self) -> String {
        let query: String = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(self.fields()).finish();
        format!("/authorize?{query}")
    }
}

#[derive(Debug)]
pub(super) enum Refusal {
    /// The client or redirect URI is not trusted: a page, no redirect.
    Page(PageError),
    /// RFC 6749 §4.1.2.1: an error sent back to the client's (verified) redirect URI.
    Redirect { redirect_uri: String, error: &'static str, description: &'static str, state: Option<String> },
}

/// What to do about a request the app built wrongly: only the app (or its developer) can fix it.
const ASK_THE_APP: &str =
    "Go back to the app that sent you here and try connecting again; if this keeps happening, tell its developer.";

fn page(message: &str) -> Refusal {
    Refusal::Page(PageError::page(
        StatusCode::BAD_REQUEST,
        "Request not valid",
        format!("The app that sent you here made a request this broker cannot accept: {message} Nothing was shared."),
        ASK_THE_APP,
    ))
}

pub(super) async fn validate(
    state: &AppState,
    documents: &DocumentCache,
    params: &Params,
) -> Result<AuthorizeRequest, Refusal> {
    if params.is_duplicated("client_id") || params.is_duplicated("redirect_uri") {
        return Err(page("The request repeats client_id or redirect_uri."));
    }
    let client_id = params.get("client_id").ok_or_else(|| page("The request names no client (client_id)."))?;
    let client = match lookup::find(state, documents, client_id).await {
        Ok(client) => client,
        Err(LookupError::Unknown) => return Err(page("This client is not registered with this server.")),
        Err(LookupError::Document(error)) => {
            tracing::info!(client_id, %error, "client metadata document refused");
            return Err(Refusal::Page(PageError::page(
                StatusCode::BAD_REQUEST,
                "Client not recognised",
                format!("The app that sent you here could not be verified ({error}), so nothing was shared."),
                ASK_THE_APP,
            )));
        }
        Err(LookupError::Store(error)) => return Err(Refusal::Page(error.into())),
    };
    let redirect_uri = params.get("redirect_uri").ok_or_else(|| page("The request has no redirect_uri."))?;
    // OAuth 2.1 §2.3.1: exact string comparison with a registered URI.
    if !client.redirect_uris.iter().any(|registered| registered == redirect_uri) {
        return Err(page("The redirect_uri is not registered for this client."));
    }
    // From here on, errors go back to the verified redirect URI.
    let raw_state = params.get("state");
    let echo_state = raw_state.filter(|s| s.len() <= MAX_STATE_LEN).map(str::to_owned);
    let fail = |error, description| Refusal::Redirect {
        redirect_uri: redirect_uri.to_owned(),
        error,
        description,
        state: echo_state.clone(),
    };
    if raw_state.is_some_and(|s| s.len() > MAX_STATE_LEN) {
        return Err(fail("invalid_request", "state is longer than 1024 characters"));
    }
    if params.has_duplicates() {
        return Err(fail("invalid_request", "a parameter was sent more than once"));
    }
    match params.get("response_type") {
        Some("code") => {}
        None => return Err(fail("invalid_request", "response_type is required")),
        Some(_) => return Err(fail("unsupported_response_type", "only response_type=code is supported")),
    }
    match params.get("code_challenge_method") {
        Some("S256") => {}
        None => return Err(fail("invalid_request", "PKCE is required: code_challenge_method=S256")),
        Some(_) => return Err(fail("invalid_request", "only the S256 code_challenge_method is supported")),
    }
    let code_challenge = params
        .get("code_challenge")
        .filter(|c| pkce::is_valid_challenge(c))
        .ok_or_else(|| fail("invalid_request", "code_challenge is missing or malformed"))?;
    // RFC 8707 §2: the resource becomes the token's `aud`: the broker's MCP endpoint, or a
    // registered tool server's (`admin services add --resource`), which presents the token to
    // the token API. Compared exactly.
    let mcp_url = state.core.config.mcp_url().to_string();
    let resource = match params.get("resource") {
        None => mcp_url,
        Some(resource) if resource == mcp_url => mcp_url,
        Some(resource) => match state.core.store.services().by_resource(resource).await {
            Ok(Some(_)) => resource.to_owned(),
            Ok(None) => {
                return Err(fail(
                    "invalid_target",
                    "resource must be this server's MCP endpoint URL or a registered tool server's",
                ));
            }
            Err(error) => {
                tracing::error!(%error, "looking up a resource failed");
                return Err(fail("server_error", "the authorization server failed; try again"));
            }
        },
    };
    let scope = scopes::for_request(&state.core.config, params.get("scope"), client.scope.as_ref())
        .map_err(|_| fail("invalid_scope", "a requested scope is unknown or not allowed for this client"))?;
    Ok(AuthorizeRequest {
        redirect_uri: redirect_uri.to_owned(),
        state: echo_state,
        code_challenge: code_challenge.to_owned(),
        scope,
        resource,
        client,
    })
}
