//! The parts of the token API's OpenAPI document that no single handler annotation can say:
//! `POST /token`'s RFC 8693 exchange (the token endpoint dispatches it among the
//! authorization server's grants, so it has no handler of its own here), and one operation per
//! method of `/v1/proxy/{provider}/{path}` (one axum handler serves them all; OpenAPI wants each
//! method as an operation with its own `operationId`, and no request body for GET or HEAD).

use utoipa::Modify;
use utoipa::openapi::path::Operation;

/// The form of an RFC 8693 token exchange at `/token` (`application/x-www-form-urlencoded`).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct TokenExchangeForm {
    /// `urn:ietf:params:oauth:grant-type:token-exchange`.
    grant_type: String,
    /// The user's access token, issued for this service's registered resource.
    subject_token: String,
    /// `urn:ietf:params:oauth:token-type:access_token`.
    subject_token_type: String,
    /// The provider's id, e.g. `github`.
    provider: String,
    /// Space-separated scopes the token must carry.
    scope: Option<String>,
    /// Which of the user's accounts at the provider.
    account: Option<String>,
    /// `urn:ietf:params:oauth:token-type:access_token` if sent.
    requested_token_type: Option<String>,
}

/// RFC 8693 §2.2.1, plus the provider and account.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct TokenExchangeResponse {
    access_token: String,
    /// `urn:ietf:params:oauth:token-type:access_token`.
    issued_token_type: String,
    /// `Bearer`.
    token_type: String,
    /// Seconds until the provider token expires, when the provider said.
    expires_in: Option<i64>,
    scope: String,
    provider: String,
    account: Option<String>,
}

/// RFC 8693 token exchange: a user's provider token for a service.
#[utoipa::path(
    post, path = "/token", tag = "tokens", operation_id = "token_exchange",
    request_body(content = TokenExchangeForm, content_type = "application/x-www-form-urlencoded"),
    security(("service" = [])),
    responses(
        (status = 200, description = "The provider's access token (RFC 8693 §2.2.1)", body = TokenExchangeResponse),
        (status = 400, description = "RFC 6749 §5.2 error: `error` is one of the problem codes (invalid_request, invalid_scope, authorization_required with `authorization`, …)"),
        (status = 401, description = "invalid_client or invalid_subject_token"),
        (status = 403, description = "forbidden"),
        (status = 409, description = "authorization_required: send the user to `authorization.url`"),
        (status = 429, description = "rate_limited: retry after `retry_after` seconds"),
        (status = 503, description = "provider_unavailable: retry after `retry_after` seconds"),
    )
)]
#[allow(dead_code)]
fn token_exchange() {}

/// The proxy's one documented operation (GET), copied to every other method it serves.
pub struct ProxyMethods;

const PROXY_PATH: &str = "/v1/proxy/{provider}/{path}";

impl Modify for ProxyMethods {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let Some(item) = openapi.paths.paths.get_mut(PROXY_PATH) else { return };
        let Some(get) = item.get.take() else { return };
        let with = |method: &str, body: bool| {
            let mut operation: Operation = get.clone();
            operation.operation_id = Some(format!("proxy_{method}"));
            if !body {
                operation.request_body = None;
            }
            operation
        };
        item.head = Some(with("head", false));
        item.post = Some(with("post", true));
        item.put = Some(with("put", true));
        item.patch = Some(with("patch", true));
        item.delete = Some(with("delete", true));
        item.get = Some(with("get", false));
    }
}
