//! `ANY /v1/proxy/{provider}/{path}`: the broker calls the provider for a service, with the
//! user's token added — for services that must never hold a token (`--proxy-only`), and open to
//! every service. What `provider_request` does for MCP clients, over HTTP: the path stays under
//! the provider's API base, redirects are not followed, and the token is stripped from anything
//! echoed back.
//!
//! The service authenticates with HTTP Basic; the user comes from `X-Subject-Token` (the user's
//! access token for this service) or, for trusted services, `X-User-Id`; `X-Account` picks one of
//! several accounts (percent-encoded UTF-8: [`super::headers`]). The query string and body are
//! forwarded as they are.
//!
//! The call itself is [`crate::broker::provider_call`]'s (the same as `provider_request`'s): the
//! path stays under the grant's API base, a 401 gets one forced refresh and one retry with the
//! same (buffered) body, and a second 401 is passed through. This face reads the HTTP request,
//! gets the token through the token API's checks, and writes the answer back as HTTP.

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::authenticated_service::AuthenticatedService;
use crate::broker::provider_call::{self, ApiMethod, ApiRequest, Body, CallError, ProviderAnswer, Query};
use crate::broker::service_access::{self, Purpose, TokenAsk};
use crate::broker::service_acting::{Subject, provider_for};
use crate::config::ProviderConfig;
use crate::problem::Problem;
use crate::state::AppState;
use crate::store::token_api::ServiceRow;

pub const SUBJECT_TOKEN_HEADER: &str = "x-subject-token";
pub const USER_ID_HEADER: &str = "x-user-id";
pub const ACCOUNT_HEADER: &str = "x-account";
/// Set to `true` when the provider's body was longer than the broker returns.
pub const TRUNCATED_HEADER: &str = "x-broker-truncated";

/// Call the provider's API as the user.
#[utoipa::path(
    get, path = "/v1/proxy/{provider}/{path}", tag = "proxy",
    params(
        ("provider" = String, Path, description = "The provider's id"),
        ("path" = String, Path, description = "The API path under the provider's API base (GET, POST, PUT, PATCH, DELETE, HEAD all work)"),
        ("X-Subject-Token" = Option<String>, Header, description = "The user's access token for this service"),
        ("X-User-Id" = Option<String>, Header, description = "A user id instead (trusted services only)"),
        ("X-Account" = Option<String>, Header, description = "Which of the user's accounts at the provider, percent-encoded as UTF-8 (`zürich` is `z%C3%BCrich`); an undecodable value is a 400, never the default account"),
    ),
    request_body(content = String, description = "Forwarded as is, with its Content-Type", content_type = "*/*"),
    security(("service" = [])),
    responses(
        (status = 200, description = "The provider's answer, status and body as it sent them (token redacted)"),
        (status = 409, description = "authorization_required (also when the provider refuses the token and its refresh: `reason` needs_reconsent)", content_type = "application/problem+json"),
        (status = 400, description = "invalid_request: the path leaves the API base, a bad method, a body with GET or HEAD, or a header that cannot be read (X-Account not percent-encoded UTF-8, non-ASCII, sent twice)", content_type = "application/problem+json"),
        (status = 401, description = "invalid_client or invalid_subject_token", content_type = "application/problem+json"),
        (status = 403, description = "forbidden", content_type = "application/problem+json"),
        (status = 404, description = "unknown_provider", content_type = "application/problem+json"),
        (status = 429, description = "rate_limited: retry after `retry_after` seconds", content_type = "application/problem+json"),
        (status = 502, description = "provider_unavailable: the provider could not be reached", content_type = "application/problem+json"),
        (status = 503, description = "provider_unavailable: the token's refresh failed or is held back (backoff, attempt cap); retry after `retry_after` seconds (also `Retry-After`)", content_type = "application/problem+json"),
    )
)]
pub async fn forward(
    State(state): State<AppState>,
    AuthenticatedService(service): AuthenticatedService,
    method: Method,
    path: Result<Path<(String, String)>, PathRejection>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // A path that does not decode (`%FF`) is the caller's mistake, said as a problem like the rest.
    let Ok(Path((provider, path))) = path else {
        return Problem::invalid_request("the path is not valid percent-encoded UTF-8").into_response();
    };
    let forwarded = Forwarded { method, provider, path, query, headers, body };
    match call(&state, &service, forwarded).await {
        Ok(response) => response,
        Err(problem) => problem.into_response(),
    }
}

/// The service's request as it arrived, to be sent on to the provider.
struct Forwarded {
    method: Method,
    /// The provider's id, from the path.
    provider: String,
    /// The API path under the provider's API base.
    path: String,
    query: Option<String>,
    headers: HeaderMap,
    body: Bytes,
}

async fn call(state: &AppState, service: &ServiceRow, forwarded: Forwarded) -> Result<Response, Problem> {
    let Forwarded { method, provider: provider_id, path, query, headers, body } = forwarded;
    let invalid = |e: provider_call::RequestError| Problem::invalid_request(e.to_string());
    let method = ApiMethod::parse(method.as_str()).map_err(invalid)?;
    let provider = provider_for(&state.core, service, &provider_id)?;
    let provider = &*provider;
    // A header that is there but unreadable is the caller's mistake (400 naming it), never
    // "absent" (an unreadable X-Account used to select the default account).
    let header = |name: &str| super::headers::text(&headers, name);
    let account = super::headers::account(&headers, ACCOUNT_HEADER)?;
    // The body is buffered (`Bytes`): it can be sent again after a 401 and a refresh.
    let content_type = header(header::CONTENT_TYPE.as_str())?;
    let body = (!body.is_empty()).then(|| Body::Raw { content_type, bytes: body });
    let query = query.as_deref().map_or(Query::None, Query::Raw);
    // Checked before the token is asked for: a path leaving the API base never costs a refresh.
    let request = ApiRequest::new(provider, method, &path, query, body)
        .map_err(invalid)?
        .accepting(header(header::ACCEPT.as_str())?);
    let subject = Subject::from_parts(header(SUBJECT_TOKEN_HEADER)?, header(USER_ID_HEADER)?)?;
    let asked = TokenAsk { provider: &provider_id, scopes: &[], account: account.as_deref() };
    // The provider may refuse the token and then its refresh: the grant is marked for
    // a new consent, and the core's decision, asked again, is the reconnect link (409
    // `needs_reconsent`), not the provider's 401. Should the user have reconnected in between,
    // the call is made once more.
    for _ in 0..2 {
        let token =
            service_access::decide(&state.core, &state.identity, service, subject, asked, Purpose::Proxy).await?;
        match provider_call::call(&state.core, provider, &request, token).await {
            Ok(answer) => return Ok(response(answer)),
            Err(CallError::Request(e)) => return Err(invalid(e)),
            Err(CallError::Unreachable(e)) => return Err(unreachable(provider, &e)),
            Err(CallError::Store(e)) => return Err(Problem::from(e)),
            Err(CallError::NeedsReconsent) => {}
        }
    }
    // Reconnected and refused again while this one call ran: the user's next try decides.
    Err(Problem::provider_unavailable(crate::broker::access::RETRY_AFTER_UNAVAILABLE.as_secs()))
}

/// 502: the provider could not be reached (or broke off); retry later.
fn unreachable(provider: &ProviderConfig, error: &provider_call::Unreachable) -> Problem {
    let mut problem = Problem::provider_unavailable(crate::broker::access::RETRY_AFTER_UNAVAILABLE.as_secs());
    problem.status = StatusCode::BAD_GATEWAY;
    problem.detail = format!("{}: {error}", provider.display_name);
    problem
}

/// The provider's status, forwarded headers and body, never stored by anyone in between.
fn response(answer: ProviderAnswer) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut response = (status, answer.body).into_response();
    let out = response.headers_mut();
    out.remove(header::CONTENT_TYPE);
    for (name, value) in &answer.headers {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name.as_str()), HeaderValue::from_str(value)) {
            out.insert(name, value);
        }
    }
    if answer.truncated {
        out.insert(HeaderName::from_static(TRUNCATED_HEADER), HeaderValue::from_static("true"));
    }
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
