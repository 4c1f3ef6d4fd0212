//! `GET /v1/openapi.json`: the token API described as OpenAPI 3.1, generated from the handlers'
//! own annotations (utoipa), so the document cannot drift from the code.

use axum::Json;
use axum::response::IntoResponse;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::authorizations::AuthorizationStatusBody;
use super::connections::{ConnectionEntry, ConnectionsBody};
use super::openapi_extra::{ProxyMethods, TokenExchangeForm, TokenExchangeResponse};
use super::tokens::{TokenRequest, TokenResponse};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "oauth-broker token API",
        description = "For registered tool servers (`oauth-broker admin services add`): a user's provider \
                       token, or the broker's link where the user must connect or consent first. Also RFC 8693 \
                       token exchange at POST /token (grant_type urn:ietf:params:oauth:grant-type:token-exchange, \
                       with `provider`), and where the user's connections stand (GET /v1/connections). Refusals \
                       are RFC 9457 problem documents with a `code` (at /token: RFC 6749 errors with the same codes)."
    ),
    paths(
        super::tokens::create,
        super::openapi_extra::token_exchange,
        super::connections::list,
        super::authorizations::show,
        super::authorizations::events,
        super::proxy::forward,
    ),
    components(schemas(
        TokenRequest,
        TokenResponse,
        TokenExchangeForm,
        TokenExchangeResponse,
        ConnectionsBody,
        ConnectionEntry,
        AuthorizationStatusBody,
        ProblemDocument
    )),
    modifiers(&ServiceAuth, &ProxyMethods, &ProblemCodes),
    tags(
        (name = "tokens", description = "Provider tokens for a user"),
        (name = "connections", description = "Where the user's connections stand (never a token)"),
        (name = "authorizations", description = "Waiting for the user to finish in the browser"),
        (name = "proxy", description = "Calling a provider without holding its token"),
    )
)]
pub struct ApiDoc;

/// RFC 9457 problem details, as every refusal is sent (`application/problem+json`).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct ProblemDocument {
    /// `urn:oauth-broker:problem:<code>`.
    r#type: String,
    title: String,
    status: u16,
    detail: String,
    /// One of [`PROBLEM_CODES`]: `authorization_required`, `provider_unavailable`,
    /// `temporarily_unavailable`, `forbidden`, `invalid_client`, `invalid_subject_token`,
    /// `unknown_provider`, `unknown_authorization`, `not_found`, `invalid_request`,
    /// `invalid_scope`, `rate_limited`, `server_error`.
    code: String,
    /// With `authorization_required`: `not_connected`, `needs_reconsent`, `missing_scopes` or
    /// `consent_required`.
    reason: Option<String>,
    /// With `missing_scopes`.
    missing_scopes: Option<Vec<String>>,
    /// With `authorization_required`: `{id, url, expires_at}` — send the user to `url`.
    authorization: Option<serde_json::Value>,
    /// With `provider_unavailable`, `temporarily_unavailable` and `rate_limited`: seconds (also
    /// in `Retry-After`).
    retry_after: Option<u64>,
    /// With `rate_limited`: which limit — `requests`, `open_waits` or `failed_authentication`.
    limit: Option<String>,
}

/// Every `code` a problem can carry (a test checks each constructor's code is here).
pub const PROBLEM_CODES: [&str; 13] = [
    "authorization_required",
    "provider_unavailable",
    "temporarily_unavailable",
    "forbidden",
    "invalid_client",
    "invalid_subject_token",
    "unknown_provider",
    "unknown_authorization",
    "not_found",
    "invalid_request",
    "invalid_scope",
    "rate_limited",
    "server_error",
];

/// The problem schema's `code` as an enum of [`PROBLEM_CODES`], so generated clients know them.
struct ProblemCodes;

impl Modify for ProblemCodes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::schema::{Object, Schema, Type};
        use utoipa::openapi::{RefOr, schema::ObjectBuilder};
        let Some(components) = openapi.components.as_mut() else { return };
        let Some(RefOr::T(Schema::Object(problem))) = components.schemas.get_mut("ProblemDocument") else { return };
        let codes: Vec<&str> = PROBLEM_CODES.to_vec();
        let code: Object = ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(codes))
            .description(Some("The problem's stable code."))
            .build();
        problem.properties.insert("code".into(), RefOr::T(Schema::Object(code)));
    }
}

/// Services authenticate with HTTP Basic: client id and secret from `admin services add`.
struct ServiceAuth;

impl Modify for ServiceAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "service",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Basic).build()),
        );
    }
}

pub async fn document() -> impl IntoResponse {
    Json(ApiDoc::openapi())
}

#[cfg(test)]
mod tests {
    use url::Url;

    use super::*;
    use crate::broker::service_refusal::RequiredReason;
    use crate::problem::{AuthorizationLink, Problem};

    #[test]
    fn every_code_a_constructor_makes_is_listed_in_the_openapi_document() {
        let link = AuthorizationLink {
            id: "a".into(),
            url: Url::parse("https://b.example/connect/a").unwrap(),
            expires_at: 1,
        };
        for problem in [
            Problem::authorization_required(RequiredReason::NotConnected, None, &link),
            Problem::provider_unavailable(1),
            Problem::database_unavailable(),
            Problem::forbidden("x"),
            Problem::invalid_client(),
            Problem::invalid_subject_token(),
            Problem::unknown_provider(),
            Problem::unknown_authorization(),
            Problem::unknown_path(),
            Problem::invalid_request("x"),
            Problem::invalid_scope("x"),
            Problem::rate_limited(1, "requests"),
            Problem::server_error(),
        ] {
            assert!(PROBLEM_CODES.contains(&problem.code), "{} is documented", problem.code);
        }
    }
}
