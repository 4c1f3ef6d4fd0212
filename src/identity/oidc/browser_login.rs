//! Browser sign-in with the issuer: OIDC Core §3.1 authorization code flow with PKCE S256
//! (RFC 7636) and a nonce.
//!
//! [`start`] (`GET /login/oidc?next=…`) picks where the browser goes at the issuer's
//! authorization endpoint. [`finish`] (`GET /login/oidc/callback`) checks the response,
//! exchanges the code, verifies the ID token ([`super::verify_id_token`]), finds or creates the
//! user by (issuer, subject), and starts a browser session exactly as local sign-in does (a new
//! cookie, never one the browser sent); the browser then goes to the local `next`. Refusals are
//! [`SignInError`]s; the routes and pages are in `src/web/oidc_login.rs`.
//!
//! **Where the pending sign-in lives.** `state`, `nonce`, the PKCE verifier, `next`, the issuer
//! and an expiry are sealed (AES-256-GCM with the broker's key, AAD naming this purpose) into a
//! short-lived cookie (`__Host-` over https, `HttpOnly`, `SameSite=Lax`, 10 minutes) rather than
//! a database row: the sign-in starts before there is a user to hang a row on, and a cookie binds
//! the attempt to the browser that started it — a callback URL carried to another browser (login
//! CSRF: signing a victim into the attacker's account) finds no cookie and is refused. Sealing
//! makes the cookie unreadable and unforgeable, so the verifier and nonce stay secret and the
//! expiry cannot be extended. Single use: the callback clears the cookie whatever the outcome,
//! records the state as used in this process until the cookie would have expired, and the
//! issuer accepts an authorization code once; a replay across instances would need the victim's
//! `HttpOnly` cookie *and* an unused code. A second sign-in started in another tab replaces the
//! first (the first tab's callback is then refused and the user starts again).
//!
//! RFC 9700 §4.4.2 (mix-up): a present `iss` parameter must equal the issuer (RFC 9207), and is
//! required when the issuer advertises it; the ID token's `iss` is checked in any case.

use axum::http::{HeaderMap, HeaderValue};
use axum_extra::extract::cookie::CookieJar;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use oauth2::basic::{BasicErrorResponseType, BasicTokenType};
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge, PkceCodeVerifier,
    RedirectUrl, RequestTokenError, StandardErrorResponse, TokenUrl,
};
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};
use url::Url;

use super::discovery::ProviderMetadata;
use super::oidc_context::OidcContext;
use super::oidc_error::OidcError;
use crate::crypto::{SealContext, constant_time_eq, random_token, sha256_hex};
use crate::error_chain::{BoxError, because};
use crate::identity::browser;
use crate::identity::context::IdentityContext;
use crate::identity::next::safe_next;
use crate::store::StoreError;

pub const LOGIN_PATH: &str = "/login/oidc";
/// Registered at the issuer exactly as `{public_url}/login/oidc/callback`.
pub use super::oidc_context::CALLBACK_PATH;
const LOGIN_COOKIE: &str = "oauth_broker_oidc_login";
/// How long the browser has to finish signing in at the issuer.
const LOGIN_TTL_SECONDS: i64 = 10 * 60;
const SCOPES: [&str; 3] = ["openid", "profile", "email"];
/// A sealed pending sign-in is under 3 KiB (with a 2 KiB `next`); refuse more before opening.
const MAX_COOKIE_BYTES: usize = 4096;

const SEAL: SealContext<'static> =
    SealContext { table: "oidc_login_cookie", column: "pending_sign_in", row_id: "v1", owner: "browser" };

/// `/login/oidc?next=<next>` with `next` made safe and percent-encoded, for the local sign-in
/// page to redirect to in oidc mode.
pub fn login_path(next: &str) -> String {
    let local = crate::identity::next::login_path(next);
    format!("{LOGIN_PATH}{}", local.strip_prefix("/login").unwrap_or("?next=/"))
}

/// Why a sign-in with the issuer did not happen. Causes are logged where they arise, never shown.
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    /// No pending sign-in in this browser, `state` not matching it or already used, or no code:
    /// the response is not valid, was already used, or belongs to another browser.
    #[error("the sign-in response is not valid, was already used, or belongs to another browser")]
    NotValid,
    /// The browser took longer than the pending sign-in's lifetime.
    #[error("the sign-in expired")]
    Expired,
    /// RFC 9207 §2.4 / RFC 9700 §4.4.2: the response came from an unexpected issuer (mix-up).
    #[error("the sign-in response came from an unexpected issuer")]
    IssuerMismatch,
    /// The issuer answered with an `error` (kept to `[A-Za-z0-9_]`, at most 64 characters).
    #[error("the issuer did not sign the browser in (error: {0})")]
    Refused(String),
    /// The ID token did not verify.
    #[error("the ID token did not verify")]
    IdTokenNotVerified,
    /// The code exchange failed (why, for the log).
    #[error("the code exchange failed: {0}")]
    ExchangeFailed(String),
    /// The issuer cannot be reached or publishes no usable endpoint.
    #[error("the identity provider is unavailable: {0}")]
    IssuerUnavailable(OidcError),
    /// An admin disabled this user (`/admin/users`).
    #[error("the user is disabled")]
    Disabled,
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A failure on our side, with its cause for the log.
    #[error("internal error")]
    Internal(#[source] BoxError),
}

/// A sign-in begun: send the browser to `location` with `cookie` set.
#[derive(Debug)]
pub struct Started {
    /// The issuer's authorization endpoint with our request.
    pub location: Url,
    /// `Set-Cookie` carrying the sealed pending sign-in.
    pub cookie: HeaderValue,
}

/// A sign-in completed: the new session's `Set-Cookie`, and the local path to go to.
#[derive(Debug)]
pub struct SignedIn {
    pub cookie: HeaderValue,
    /// Already made safe ([`safe_next`]).
    pub next: String,
}

/// A sign-in in progress, sealed into the browser's cookie.
#[derive(Serialize, Deserialize)]
struct PendingSignIn {
    state: String,
    nonce: String,
    verifier: String,
    next: String,
    /// The issuer the browser was sent to (mix-up defence).
    issuer: String,
    expires_at: i64,
}

// OIDC Core §3.1.2.1, RFC 7636 §4.3.
/// Begins a sign-in that will come back to the local path `next` (made safe here).
pub async fn start(state: &IdentityContext, ctx: &OidcContext, next: &str) -> Result<Started, SignInError> {
    let now = state.now();
    let metadata = ctx.metadata(now).await.map_err(issuer_unavailable)?;
    let Some(authorization_endpoint) = metadata.authorization_endpoint.clone() else {
        tracing::error!(issuer = %metadata.issuer, "the OIDC issuer publishes no authorization_endpoint");
        return Err(issuer_unavailable(OidcError::BadIssuerResponse("no authorization_endpoint".into())));
    };
    let pending = PendingSignIn {
        state: random_token(32),
        nonce: random_token(32),
        verifier: random_token(32),
        next: safe_next(next).to_owned(),
        issuer: metadata.issuer.clone(),
        expires_at: now + LOGIN_TTL_SECONDS,
    };
    let challenge = PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(pending.verifier.clone()));
    let csrf = pending.state.clone();
    let (location, _) = oauth2::basic::BasicClient::new(ClientId::new(ctx.client_id.clone()))
        .set_auth_uri(AuthUrl::from_url(authorization_endpoint))
        .set_redirect_uri(RedirectUrl::from_url(ctx.redirect_uri.clone()))
        .authorize_url(move || CsrfToken::new(csrf))
        .set_pkce_challenge(challenge)
        .add_scopes(SCOPES.map(|s| oauth2::Scope::new(s.to_owned())))
        .add_extra_param("nonce", pending.nonce.clone())
        .url();
    let plaintext = serde_json::to_vec(&pending)
        .map_err(|error| SignInError::Internal(because("the pending sign-in could not be encoded", error)))?;
    let sealed = URL_SAFE_NO_PAD.encode(state.sealer.seal(&plaintext, SEAL));
    let cookie = browser::set_cookie(LOGIN_COOKIE, &sealed, LOGIN_TTL_SECONDS, ctx.secure_cookies);
    Ok(Started { location, cookie })
}

/// The callback's query parameters (OIDC Core §3.1.2.5–§3.1.2.6, RFC 9207 §2).
#[derive(Debug, Default, Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    iss: Option<String>,
}

/// `Set-Cookie` ending the pending sign-in. Single use: the callback sends it whatever happened.
pub fn clear_pending(ctx: &OidcContext) -> HeaderValue {
    browser::set_cookie(LOGIN_COOKIE, "", 0, ctx.secure_cookies)
}

// OIDC Core §3.1.2.5-§3.1.3.7, RFC 9207 §2.4.
/// Completes the sign-in this browser started, given the issuer's answer.
pub async fn finish(
    state: &IdentityContext,
    ctx: &OidcContext,
    headers: &HeaderMap,
    query: CallbackQuery,
) -> Result<SignedIn, SignInError> {
    let now = state.now();
    let pending = read_pending(state, ctx, headers).ok_or(SignInError::NotValid)?;
    let presented = query.state.as_deref().unwrap_or_default();
    if !constant_time_eq(presented.as_bytes(), pending.state.as_bytes()) {
        tracing::info!("OIDC sign-in callback refused: state does not match this browser's sign-in");
        return Err(SignInError::NotValid);
    }
    if pending.expires_at <= now {
        return Err(SignInError::Expired);
    }
    if !ctx.consume_state(sha256_hex(&pending.state), pending.expires_at, now) {
        tracing::info!("OIDC sign-in callback refused: state already used");
        return Err(SignInError::NotValid);
    }
    let metadata = ctx.metadata(now).await.map_err(issuer_unavailable)?;
    // RFC 9207 §2.4: compare a present `iss`; require it when the issuer says it sends one.
    match &query.iss {
        Some(iss) if *iss != pending.issuer => return Err(mix_up()),
        None if metadata.authorization_response_iss_parameter_supported => return Err(mix_up()),
        _ => {}
    }
    if metadata.issuer != pending.issuer {
        return Err(mix_up());
    }
    if let Some(error) = &query.error {
        let code: String = error.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(64).collect();
        tracing::info!(error = %code, "the OIDC issuer did not sign the browser in");
        return Err(SignInError::Refused(code));
    }
    let Some(code) = query.code.filter(|c| !c.is_empty()) else { return Err(SignInError::NotValid) };
    let id_token = exchange_code(ctx, &metadata, &code, &pending.verifier).await?;
    let claims = super::verify::verify_id_token(ctx, &id_token, &pending.nonce, now).await.map_err(|error| {
        if error.is_unavailable() {
            return issuer_unavailable(error);
        }
        tracing::warn!(%error, "OIDC sign-in refused: the ID token did not verify");
        SignInError::IdTokenNotVerified
    })?;
    let mut user = state.store.users().upsert_external(&claims.issuer, &claims.subject, now).await?;
    if user.is_disabled() {
        state
            .store
            .audit()
            .record_implied(now, Some(&user.id), "browser.sign_in_refused", None, Some("disabled"))
            .await?;
        return Err(SignInError::Disabled);
    }
    // `[identity] admin_claim`: the issuer decides who is an admin, at every sign-in.
    if let Some((claim, value)) = &state.config.identity.admin_claim {
        let admin = claims.claim_has(claim, value);
        if admin != user.is_admin() {
            state.store.users().set_admin(&user.id, admin).await?;
            let detail = format!("admin={admin} actor=issuer claim={claim}");
            state
                .store
                .audit()
                .record_implied(now, Some(&user.id), "user.admin_from_claim", None, Some(&detail))
                .await?;
            user.admin = i64::from(admin);
        }
    }
    if user.display_name != claims.display_name {
        state.store.users().set_display_name(&user.id, claims.display_name.as_deref()).await?;
        user.display_name = claims.display_name.clone();
    }
    // Session fixation: whatever session the browser presented is ended, and a new one minted.
    if let Some(old) = browser::presented_session_hash(state, headers) {
        state.store.browser_sessions().delete(&old).await?;
    }
    let (session, cookie) = browser::sign_in(state, user).await?;
    state.store.audit().record_implied(now, Some(&session.user.id), "browser.signed_in", None, Some("oidc")).await?;
    tracing::info!(user_id = %session.user.id, "browser signed in with the OIDC issuer");
    Ok(SignedIn { cookie, next: safe_next(&pending.next).to_owned() })
}

/// The pending sign-in sealed in this browser's cookie, if there is one and it opens.
fn read_pending(state: &IdentityContext, ctx: &OidcContext, headers: &HeaderMap) -> Option<PendingSignIn> {
    let jar = CookieJar::from_headers(headers);
    let value = jar.get(&browser::cookie_name(LOGIN_COOKIE, ctx.secure_cookies))?.value().to_owned();
    if value.is_empty() || value.len() > MAX_COOKIE_BYTES {
        return None;
    }
    let sealed = URL_SAFE_NO_PAD.decode(value).ok()?;
    let plaintext = state.sealer.open(&sealed, SEAL).ok()?;
    serde_json::from_slice(&plaintext).ok()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct IdTokenField {
    #[serde(default)]
    id_token: Option<String>,
}

impl oauth2::ExtraTokenFields for IdTokenField {}

type SignInClient = oauth2::Client<
    StandardErrorResponse<BasicErrorResponseType>,
    oauth2::StandardTokenResponse<IdTokenField, BasicTokenType>,
    oauth2::StandardTokenIntrospectionResponse<IdTokenField, BasicTokenType>,
    oauth2::StandardRevocableToken,
    StandardErrorResponse<oauth2::RevocationErrorResponseType>,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointSet,
>;

/// OIDC Core §3.1.3.1-§3.1.3.3: the code for tokens; returns the ID token. Client
/// authentication is `client_secret_basic` (RFC 6749 §2.3.1) unless the issuer lists only
/// `client_secret_post`; without a secret we are a public client and PKCE alone binds the code.
async fn exchange_code(
    ctx: &OidcContext,
    metadata: &ProviderMetadata,
    code: &str,
    verifier: &str,
) -> Result<String, SignInError> {
    let Some(token_endpoint) = metadata.token_endpoint.clone() else {
        return Err(issuer_unavailable(OidcError::BadIssuerResponse("no token_endpoint".into())));
    };
    let methods = &metadata.token_endpoint_auth_methods_supported;
    let post_only =
        methods.iter().any(|m| m == "client_secret_post") && !methods.iter().any(|m| m == "client_secret_basic");
    let mut client: SignInClient = oauth2::Client::new(ClientId::new(ctx.client_id.clone()))
        .set_token_uri(TokenUrl::from_url(token_endpoint))
        .set_redirect_uri(RedirectUrl::from_url(ctx.redirect_uri.clone()))
        .set_auth_type(if post_only { AuthType::RequestBody } else { AuthType::BasicAuth });
    if let Some(secret) = &ctx.client_secret {
        client = client.set_client_secret(ClientSecret::new(secret.expose_secret().to_owned()));
    }
    let send = super::fetch::sender(&ctx.http);
    let result = client
        .exchange_code(AuthorizationCode::new(code.to_owned()))
        .set_pkce_verifier(PkceCodeVerifier::new(verifier.to_owned()))
        .request_async(&send)
        .await;
    let refused = |why: String| {
        tracing::warn!(%why, "OIDC sign-in: the code exchange failed");
        SignInError::ExchangeFailed(why)
    };
    match result {
        Ok(response) => {
            response.extra_fields().id_token.clone().ok_or_else(|| refused("no id_token in the token response".into()))
        }
        Err(RequestTokenError::ServerResponse(error)) => {
            Err(refused(format!("token endpoint error {}", error.error())))
        }
        Err(RequestTokenError::Request(error)) => Err(refused(error.to_string())),
        Err(RequestTokenError::Parse(_, _)) => Err(refused("unparseable token response".into())),
        Err(RequestTokenError::Other(other)) => Err(refused(other)),
    }
}

fn mix_up() -> SignInError {
    tracing::warn!("OIDC sign-in callback refused: issuer mismatch (RFC 9207)");
    SignInError::IssuerMismatch
}

fn issuer_unavailable(error: OidcError) -> SignInError {
    tracing::error!(%error, "OIDC sign-in: the identity provider is unavailable");
    SignInError::IssuerUnavailable(error)
}
