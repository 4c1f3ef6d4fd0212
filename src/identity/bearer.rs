//! Bearer authentication for /mcp (MCP 2025-11-25 basic/authorization; RFC 6750; RFC 9728).
//!
//! Every /mcp request carries its own token — a session id is never a credential. The token is
//! verified (signature, algorithm, `iss`, `aud` = our MCP URL, `exp`) and must name a known
//! user; the result is put in the request's extensions, where rmcp hands it to the MCP handler
//! (through `http::request::Parts`). Failures get 401 with a `WWW-Authenticate` challenge that
//! points at the protected-resource metadata, which we serve under both well-known paths.

use axum::Json;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use super::authenticated_user::AuthenticatedUser;
use super::bearer_cache::TokenKey;
use crate::identity::context::IdentityContext;

/// RFC 9728 §3 metadata for the MCP endpoint, at the root and at the path-suffixed location.
pub fn metadata_router<S: AsRef<IdentityContext> + Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/.well-known/oauth-protected-resource", get(protected_resource_metadata::<S>))
        .route("/.well-known/oauth-protected-resource/mcp", get(protected_resource_metadata::<S>))
        .route("/.well-known/jwks.json", get(jwks::<S>))
}

// RFC 9728 §3.2; `resource` is exactly the MCP endpoint URL (§3.3 check done by clients).
async fn protected_resource_metadata<S: AsRef<IdentityContext>>(State(state): State<S>) -> Response {
    let state = state.as_ref();
    if let Some(oidc) = &state.oidc {
        return ([(header::CACHE_CONTROL, "max-age=300")], Json(oidc.resource_metadata())).into_response();
    }
    let body = json!({
        "resource": state.config.mcp_url().as_str(),
        "authorization_servers": [state.config.issuer()],
        "bearer_methods_supported": ["header"],
        "resource_signing_alg_values_supported": ["EdDSA"],
        "resource_name": "oauth-broker",
        "jwks_uri": state.config.url("/.well-known/jwks.json").as_str(),
    });
    ([(header::CACHE_CONTROL, "max-age=300")], Json(body)).into_response()
}

async fn jwks<S: AsRef<IdentityContext>>(State(state): State<S>) -> Response {
    ([(header::CACHE_CONTROL, "max-age=300")], Json(state.as_ref().keys.jwks())).into_response()
}

/// Axum middleware for the /mcp route.
pub async fn require_bearer<S: AsRef<IdentityContext>>(
    State(state): State<S>,
    mut request: Request,
    next: Next,
) -> Response {
    let state = state.as_ref();
    let user = match authenticate(state, request.headers()).await {
        Ok(user) => user,
        Err(Rejection::Missing) if state.fixed_identity.is_some() => match fixed_identity(state).await {
            Some(user) => user,
            None => return Rejection::Unavailable.into_response_for(state),
        },
        Err(rejection) => return rejection.into_response_for(state),
    };
    request.extensions_mut().insert(user);
    next.run(request).await
}

#[derive(Debug)]
pub enum Rejection {
    /// No credentials: the challenge carries no error code (RFC 6750 §3.1).
    Missing,
    /// Credentials present but unusable.
    Invalid(&'static str),
    /// A valid token without the required scopes (RFC 6750 §3.1); carries the scopes to ask for.
    InsufficientScope(String),
    /// The database could not be asked.
    Unavailable,
}

impl Rejection {
    fn into_response_for(self, state: &IdentityContext) -> Response {
        let metadata = state.config.url("/.well-known/oauth-protected-resource/mcp");
        // MCP 2025-11-25 authorization §Scope selection (SEP-835): a 401 challenge SHOULD name
        // the scopes to ask for; clients take them as authoritative. Only configured scopes.
        let scope = match state.config.identity.required_scopes.join(" ") {
            scopes if scopes.is_empty() => String::new(),
            scopes => format!(", scope=\"{scopes}\""),
        };
        let (status, challenge, body) = match self {
            Rejection::Missing => (
                StatusCode::UNAUTHORIZED,
                format!("Bearer resource_metadata=\"{metadata}\"{scope}"),
                json!({"error": "invalid_request", "error_description": "a bearer token is required"}),
            ),
            Rejection::Invalid(why) => (
                StatusCode::UNAUTHORIZED,
                format!(
                    "Bearer error=\"invalid_token\", error_description=\"{why}\", resource_metadata=\"{metadata}\"{scope}"
                ),
                json!({"error": "invalid_token", "error_description": why}),
            ),
            Rejection::InsufficientScope(scope) => (
                StatusCode::FORBIDDEN,
                format!(
                    "Bearer error=\"insufficient_scope\", scope=\"{scope}\", resource_metadata=\"{metadata}\", error_description=\"the token lacks required scopes\""
                ),
                json!({"error": "insufficient_scope", "scope": scope}),
            ),
            Rejection::Unavailable => {
                return (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"error": "temporarily_unavailable"})))
                    .into_response();
            }
        };
        let mut response = (status, Json(body)).into_response();
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// The test harness's fixed user (see `AppBuilder::fixed_identity_for_tests`).
async fn fixed_identity(state: &IdentityContext) -> Option<AuthenticatedUser> {
    let name = state.fixed_identity.as_deref()?;
    let user = state.store.users().by_username(name).await.ok().flatten()?;
    Some(AuthenticatedUser {
        user_id: user.id,
        issuer: user.issuer,
        subject: user.subject,
        display_name: user.username,
        client: crate::domain::ClientIdentity::IssuedToken(None),
    })
}

/// Verifies the request's bearer token (for /mcp) and finds its user.
pub async fn authenticate(state: &IdentityContext, headers: &HeaderMap) -> Result<AuthenticatedUser, Rejection> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(Rejection::Missing);
    };
    let value = value.to_str().map_err(|_| Rejection::Invalid("malformed authorization header"))?;
    let token = match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => token.trim(),
        _ => return Err(Rejection::Invalid("expected a Bearer token")),
    };
    match &state.oidc {
        Some(oidc) => {
            let user = crate::identity::oidc::authenticate_bearer(state, oidc, token).await.map_err(Rejection::from)?;
            refuse_disabled(state, user).await
        }
        // The keys' audience is the /mcp URL (`app::build_state_with`), kept as a string:
        // `Config::mcp_url` parses a URL each time (~3% of a tool call's instructions).
        None => authenticate_local(state, token, state.keys.audience()).await,
    }
}

/// Whether `audience` is one the broker accepts for itself (the /mcp bearer audience, or in
/// oidc mode our client id). A tool server registered with such a resource would take tokens
/// meant for the broker — any MCP client's — as its own users' (token passthrough, MCP
/// security best practices), so the token API refuses it and `admin services add` does too.
pub fn is_own_audience(state: &IdentityContext, audience: &str) -> bool {
    match &state.oidc {
        Some(oidc) => oidc.own_audiences().contains(&audience),
        None => audience == state.keys.audience() || audience == state.config.mcp_url().as_str(),
    }
}

/// A user's access token meant for `audience` (a registered tool server's resource URL),
/// presented by that tool server to the token API (RFC 8693 `subject_token`): the same checks
/// as a bearer token on /mcp — signature, algorithm, issuer, expiry, a live grant, a known user —
/// with that audience instead of ours.
pub async fn authenticate_for_audience(
    state: &IdentityContext,
    token: &str,
    audience: &str,
) -> Result<AuthenticatedUser, Rejection> {
    match &state.oidc {
        Some(oidc) => {
            let user = crate::identity::oidc::authenticate_bearer_for(state, oidc, token, audience)
                .await
                .map_err(Rejection::from)?;
            refuse_disabled(state, user).await
        }
        None => authenticate_local(state, token, audience).await,
    }
}

/// An issuer's token for a user an admin disabled stops working at once (local tokens are
/// checked in [`authenticate_local`], which reads the user anyway).
async fn refuse_disabled(state: &IdentityContext, user: AuthenticatedUser) -> Result<AuthenticatedUser, Rejection> {
    match state.store.users().by_id(&user.user_id).await {
        Ok(Some(row)) if row.is_disabled() => Err(Rejection::Invalid("the token's user is disabled")),
        Ok(_) => Ok(user),
        Err(e) => {
            tracing::error!(error = %e, "user lookup failed");
            Err(Rejection::Unavailable)
        }
    }
}

/// The broker's own JWT (local identity mode), for `audience`: from the cache when it was
/// verified before and nothing it rests on has changed since ([`super::bearer_cache`]), else
/// verified and remembered.
async fn authenticate_local(
    state: &IdentityContext,
    token: &str,
    audience: &str,
) -> Result<AuthenticatedUser, Rejection> {
    let now = state.now();
    // Without a watcher on other processes' writes nothing cached is trusted: verify fully.
    let Some(before) = state.store.cache_tick() else {
        return verify_local(state, token, audience, now).await.map(|(user, _)| user);
    };
    let key = TokenKey::new(token, audience);
    if let Some(user) = state.bearer_cache.get(&key, now, |user_id| state.store.cache_generation(user_id)) {
        return Ok(user);
    }
    let (user, refused_from) = verify_local(state, token, audience, now).await?;
    let generation = state.store.cache_generation(&user.user_id);
    state.bearer_cache.insert(before, generation, key, user.clone(), refused_from);
    Ok(user)
}

/// Signature, algorithm, issuer, audience, expiry, a live authorization and an enabled user;
/// the user, and when the token stops being accepted.
async fn verify_local(
    state: &IdentityContext,
    token: &str,
    audience: &str,
    now: crate::clock::Timestamp,
) -> Result<(AuthenticatedUser, crate::clock::Timestamp), Rejection> {
    let claims = state.keys.verify_for(token, audience, now).map_err(|e| {
        tracing::debug!(error = %e, "bearer token rejected");
        match e {
            crate::identity::jwt::JwtError::Expired => Rejection::Invalid("the token has expired"),
            _ => Rejection::Invalid("the token is not valid for this server"),
        }
    })?;
    if let Some(delegation_id) = &claims.delegation_id {
        let active = state.store.oauth_grants().is_active(delegation_id).await.map_err(|e| {
            tracing::error!(error = %e, "grant lookup failed");
            Rejection::Unavailable
        })?;
        if !active {
            return Err(Rejection::Invalid("the token's authorization was revoked"));
        }
    }
    let lookup_failed = |e: crate::store::StoreError| {
        tracing::error!(error = %e, "user lookup failed");
        Rejection::Unavailable
    };
    let user = match state.store.users().by_identity(&claims.iss, &claims.sub).await.map_err(lookup_failed)? {
        Some(user) => user,
        // A local account keeps its identity when the broker's public URL changes: its row
        // still records the URL it was created under, but the token was signed by this broker's
        // own key for its current issuer, and a local account's subject is its id.
        None => state
            .store
            .users()
            .by_id(&claims.sub)
            .await
            .map_err(lookup_failed)?
            .filter(crate::store::users::User::is_local)
            .ok_or(Rejection::Invalid("the token names an unknown user"))?,
    };
    if user.is_disabled() {
        return Err(Rejection::Invalid("the token's user is disabled"));
    }
    let user = AuthenticatedUser {
        user_id: user.id,
        issuer: user.issuer,
        subject: user.subject,
        display_name: user.username,
        client: claims.client(),
    };
    Ok((user, claims.exp.saturating_add(crate::identity::jwt::LEEWAY_SECONDS as i64)))
}

impl From<crate::identity::oidc::oidc_error::OidcError> for Rejection {
    fn from(error: crate::identity::oidc::oidc_error::OidcError) -> Self {
        match error {
            crate::identity::oidc::oidc_error::OidcError::InsufficientScope { scope } => {
                Rejection::InsufficientScope(scope)
            }
            error if error.is_unavailable() => Rejection::Unavailable,
            error => Rejection::Invalid(error.description()),
        }
    }
}
