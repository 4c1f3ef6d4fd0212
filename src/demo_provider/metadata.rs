//! The demo provider's issuer identifier and its RFC 8414 metadata.

use axum::extract::State;
use axum::response::Json;
use serde_json::{Value, json};

use crate::domain::demo_scopes::DemoScope;
use crate::state::AppState;

/// The issuer identifier, without a trailing slash; also the `iss` of authorization responses.
pub fn issuer(state: &AppState) -> String {
    state.core.config.url("/demo-provider").as_str().trim_end_matches('/').to_owned()
}

// RFC 8414 §2 (served at the issuer + /.well-known path, as OpenID Connect Discovery does).
pub(super) async fn metadata(State(state): State<AppState>) -> Json<Value> {
    let issuer = issuer(&state);
    let scopes: Vec<&str> = DemoScope::ALL.iter().map(|s| s.as_str()).collect();
    Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "revocation_endpoint": format!("{issuer}/revoke"),
        "scopes_supported": scopes,
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "revocation_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": true,
    }))
}
