//! OAuth 2.0 Token Exchange (RFC 8693) at `/token`, for services, in either identity mode: a
//! tool server authenticates as itself (HTTP Basic, RFC 6749 §2.3.1:
//! [`crate::identity::service_auth`]), presents the access token its user's MCP client gave it
//! (`subject_token`, whose audience is the tool server's registered resource) and names the
//! provider; it gets that provider's access token back — the shape of Auth0 Token Vault's
//! "access token exchange". The decision is the one `/v1/tokens` gets
//! ([`crate::broker::service_access::decide`]), and its refusals keep the token API's codes and
//! words ([`crate::problem`]), in RFC 6749 §5.2 shape.
//!
//! ```text
//! grant_type=urn:ietf:params:oauth:grant-type:token-exchange
//! subject_token=<user's access token>  subject_token_type=urn:ietf:params:oauth:token-type:access_token
//! provider=github  [scope=repo read:user]  [account=octocat]
//! [requested_token_type=urn:ietf:params:oauth:token-type:access_token]
//! ```

use axum::Json;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use secrecy::ExposeSecret;
use serde::Serialize;

use crate::broker::service_access::{self, Purpose, TokenAsk};
use crate::broker::service_acting::Subject;
use crate::identity::service_auth;
use crate::problem::Problem;
use crate::state::AppState;
use crate::token_endpoint::oauth_error::no_store;

/// RFC 8693 §2.1 `grant_type`.
pub const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 8693 §3: the only token type accepted and issued.
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// RFC 8693 §2.2.1, plus the provider and account. Deliberately not `Debug`.
#[derive(Serialize)]
struct ExchangeResponse {
    access_token: String,
    issued_token_type: &'static str,
    token_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_in: Option<i64>,
    scope: String,
    provider: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    account: Option<String>,
}

/// Handles a token-exchange request whose form parameters were already parsed (and checked for
/// duplicates) by the token endpoint. `get` reads one parameter.
pub async fn exchange<'p>(
    state: &AppState,
    headers: &HeaderMap,
    address: &str,
    get: impl Fn(&str) -> Option<&'p str>,
) -> Response {
    match answer(state, headers, address, &get).await {
        Ok(body) => {
            let mut response = Json(body).into_response();
            no_store(&mut response);
            response
        }
        Err(problem) => {
            let mut response = (problem.status, Json(problem.oauth_error_body())).into_response();
            problem.add_headers(&mut response);
            no_store(&mut response);
            response
        }
    }
}

async fn answer<'p>(
    state: &AppState,
    headers: &HeaderMap,
    address: &str,
    get: &impl Fn(&str) -> Option<&'p str>,
) -> Result<ExchangeResponse, Problem> {
    let service = service_auth::authenticate(&state.identity, headers, address).await?;
    let token = get("subject_token")
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Problem::invalid_request("subject_token is required"))?;
    match get("subject_token_type") {
        Some(ACCESS_TOKEN_TYPE) => {}
        Some(_) => {
            return Err(Problem::invalid_request(
                "subject_token_type must be urn:ietf:params:oauth:token-type:access_token",
            ));
        }
        None => return Err(Problem::invalid_request("subject_token_type is required")),
    }
    if get("requested_token_type").is_some_and(|t| t != ACCESS_TOKEN_TYPE) {
        return Err(Problem::invalid_request("only access tokens can be requested"));
    }
    if get("actor_token").is_some() {
        return Err(Problem::invalid_request("actor_token is not supported"));
    }
    let provider =
        get("provider").filter(|p| !p.is_empty()).ok_or_else(|| Problem::invalid_request("provider is required"))?;
    let scopes: Vec<String> = get("scope").unwrap_or_default().split_whitespace().map(str::to_owned).collect();
    let asked = TokenAsk { provider, scopes: &scopes, account: get("account") };
    let now = state.core.now();
    let token =
        service_access::decide(&state.core, &state.identity, &service, Subject::Token(token), asked, Purpose::RawToken)
            .await?;
    Ok(ExchangeResponse {
        access_token: token.token.expose_secret().to_owned(),
        issued_token_type: ACCESS_TOKEN_TYPE,
        token_type: "Bearer",
        expires_in: token.grant.expires_at.map(|at| (at - now).max(0)),
        scope: token.grant.scopes.to_space_separated(),
        provider: token.grant.provider.clone(),
        account: token.grant.account_label.clone(),
    })
}
