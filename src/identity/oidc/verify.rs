//! Verifying the issuer's JWTs: bearer access tokens on /mcp (RFC 9068 shape, MCP 2025-11-25
//! basic/authorization "token validation") and ID tokens at browser sign-in (OIDC Core
//! §3.1.3.7).
//!
//! Order matters: nothing in a token is believed before its signature verifies.
//! 1. The header's `alg` must be on the configured allow-list (never `none`, which does not even
//!    parse, never HMAC: an HS256 token "signed" with the issuer's public key fails here).
//! 2. The key is the issuer's key named by `kid` (an unknown `kid` triggers one rate-limited
//!    refresh), and its type (and curve, and own `alg` if it names one) must fit `alg`.
//! 3. Signature, by `jsonwebtoken` with exactly that one algorithm allowed.
//! 4. Claims, against the injected clock: `iss` equal to the issuer's own spelling, `aud`
//!    (string or array) containing the expected audience, `exp` required and `nbf`/`iat`
//!    checked with the configured leeway, `sub` present, non-empty, at most 255 bytes.
//! 5. Bearer only: the configured required scopes, from `scope` (space-separated) or `scp`
//!    (array or string); missing ones are [`OidcError::InsufficientScope`] (403, not 401).
//!    ID token only: `nonce` equal to this sign-in's, `azp` (if present, or if there are
//!    several audiences) equal to our client id.

use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;

use super::oidc_context::OidcContext;
use super::oidc_error::OidcError;
use crate::clock::Timestamp;
use crate::crypto::{constant_time_eq, sha256_hex};
use crate::identity::authenticated_user::AuthenticatedUser;
use crate::identity::context::IdentityContext;

/// Tokens are at most a few kilobytes; anything larger is refused before parsing.
const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// OIDC Core §2: `sub` is at most 255 ASCII characters.
const MAX_SUBJECT_BYTES: usize = 255;
/// Longer client ids are stored as `sha256:<hex>` of the id.
const MAX_CLIENT_ID_BYTES: usize = 255;

/// What a verified token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedClaims {
    /// Exactly the issuer's spelling (the users table's `issuer`).
    pub issuer: String,
    pub subject: String,
    /// From `scope` and `scp`, in order, without duplicates.
    pub scopes: Vec<String>,
    /// `name`, else `preferred_username`, else `email`: for display only.
    pub display_name: Option<String>,
    /// The client the token was issued to: RFC 9068 `client_id`, else OIDC `azp`, else the
    /// vendor spellings `cid` (Okta) and `appid` (Entra ID v1).
    pub client_id: Option<String>,
    pub expires_at: Timestamp,
    /// The claims not read above (`groups`, `roles`, …), for [`VerifiedClaims::claim_has`].
    pub other: serde_json::Map<String, serde_json::Value>,
}

impl VerifiedClaims {
    /// Whether claim `name` is the string `value` or a list holding it (`[identity] admin_claim`).
    pub fn claim_has(&self, name: &str, value: &str) -> bool {
        match self.other.get(name) {
            Some(serde_json::Value::String(s)) => s == value,
            Some(serde_json::Value::Array(items)) => items.iter().any(|item| item.as_str() == Some(value)),
            _ => false,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn values(&self) -> Vec<&str> {
        match self {
            OneOrMany::One(value) => vec![value.as_str()],
            OneOrMany::Many(values) => values.iter().map(String::as_str).collect(),
        }
    }
}

/// The claims we read. `iss` must be a single string; anything else fails to parse, which is a
/// refusal.
#[derive(Debug, Deserialize)]
struct Claims {
    iss: Option<String>,
    sub: Option<String>,
    aud: Option<OneOrMany>,
    exp: Option<serde_json::Number>,
    nbf: Option<serde_json::Number>,
    iat: Option<serde_json::Number>,
    scope: Option<String>,
    scp: Option<OneOrMany>,
    nonce: Option<String>,
    azp: Option<String>,
    client_id: Option<String>,
    cid: Option<String>,
    appid: Option<String>,
    name: Option<String>,
    preferred_username: Option<String>,
    email: Option<String>,
    #[serde(flatten)]
    other: serde_json::Map<String, serde_json::Value>,
}

/// RFC 7519 NumericDate: seconds, possibly fractional.
fn seconds(value: &serde_json::Number) -> Option<i64> {
    value.as_i64().or_else(|| value.as_f64().filter(|f| f.is_finite() && f.abs() < 1e15).map(|f| f.floor() as i64))
}

/// What a token must satisfy besides the common rules.
struct Expected<'a> {
    audience: &'a str,
    /// ID tokens: the sign-in's nonce, and our client id for `azp`.
    id_token: Option<(&'a str, &'a str)>,
}

async fn verify(
    ctx: &OidcContext,
    token: &str,
    now: Timestamp,
    expected: Expected<'_>,
) -> Result<VerifiedClaims, OidcError> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(OidcError::Malformed);
    }
    // Rejects `alg: none` too: it is not an `Algorithm`, so the header does not parse.
    let header = jsonwebtoken::decode_header(token).map_err(|_| OidcError::Malformed)?;
    if !ctx.algorithms.contains(&header.alg) || is_hmac(header.alg) {
        return Err(OidcError::AlgorithmNotAllowed);
    }
    if header.crit.is_some() {
        // RFC 7515 §4.1.11: we understand no extension, so a critical one must be refused.
        return Err(OidcError::Malformed);
    }
    let (issuer, key) = ctx.key_for(header.kid.as_deref(), now).await?;
    if !key.accepts(header.alg) {
        return Err(OidcError::KeyMismatch);
    }
    let mut validation = Validation::new(header.alg);
    // Claims are checked below, against the injected clock and exactly.
    validation.required_spec_claims.clear();
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    let data = jsonwebtoken::decode::<Claims>(token, &key.decoding, &validation).map_err(|e| {
        use jsonwebtoken::errors::ErrorKind as K;
        match e.kind() {
            K::InvalidSignature => OidcError::BadSignature,
            K::InvalidAlgorithm
            | K::InvalidKeyFormat
            | K::InvalidEcdsaKey
            | K::InvalidEddsaKey
            | K::InvalidRsaKey(_) => OidcError::KeyMismatch,
            _ => OidcError::Malformed,
        }
    })?;
    let claims = data.claims;

    if claims.iss.as_deref() != Some(issuer.as_str()) {
        return Err(OidcError::WrongIssuer);
    }
    let audiences = claims.aud.as_ref().map(OneOrMany::values).unwrap_or_default();
    if !audiences.contains(&expected.audience) {
        return Err(OidcError::WrongAudience);
    }
    let leeway = ctx.leeway;
    let exp = claims.exp.as_ref().and_then(seconds).ok_or(OidcError::MissingClaim("exp"))?;
    if exp.saturating_add(leeway) <= now {
        return Err(OidcError::Expired);
    }
    if let Some(nbf) = &claims.nbf
        && seconds(nbf).is_none_or(|nbf| nbf > now.saturating_add(leeway))
    {
        return Err(OidcError::NotYetValid);
    }
    if let Some(iat) = &claims.iat
        && seconds(iat).is_none_or(|iat| iat > now.saturating_add(leeway))
    {
        return Err(OidcError::IssuedInFuture);
    }
    let subject = claims.sub.clone().ok_or(OidcError::MissingClaim("sub"))?;
    if subject.is_empty() || subject.len() > MAX_SUBJECT_BYTES {
        return Err(OidcError::BadSubject);
    }
    if let Some((nonce, client_id)) = expected.id_token {
        let matches = claims.nonce.as_deref().is_some_and(|n| constant_time_eq(n.as_bytes(), nonce.as_bytes()));
        if !matches {
            return Err(OidcError::NonceMismatch);
        }
        let azp_ok = match &claims.azp {
            Some(azp) => azp == client_id,
            None => audiences.len() == 1,
        };
        if !azp_ok {
            return Err(OidcError::WrongAuthorizedParty);
        }
    }
    let mut scopes: Vec<String> = Vec::new();
    let from_scope = claims.scope.iter().flat_map(|s| s.split_whitespace());
    let from_scp = claims.scp.iter().flat_map(|s| s.values()).flat_map(str::split_whitespace);
    for scope in from_scope.chain(from_scp) {
        if !scopes.iter().any(|s| s == scope) {
            scopes.push(scope.to_owned());
        }
    }
    let display_name = [&claims.name, &claims.preferred_username, &claims.email]
        .into_iter()
        .flatten()
        .find(|s| !s.trim().is_empty())
        .map(|s| s.chars().take(200).collect());
    // A very long id (a URL-style client id) is kept as its hash, never dropped: dropping it
    // would merge the client with every token that names none.
    let client_id = [&claims.client_id, &claims.azp, &claims.cid, &claims.appid]
        .into_iter()
        .flatten()
        .find(|id| !id.is_empty())
        .map(|id| if id.len() <= MAX_CLIENT_ID_BYTES { id.clone() } else { format!("sha256:{}", sha256_hex(id)) });
    Ok(VerifiedClaims { issuer, subject, scopes, display_name, client_id, expires_at: exp, other: claims.other })
}

fn is_hmac(alg: Algorithm) -> bool {
    matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)
}

/// A bearer token on /mcp: every rule in the module docs, audience = the configured audience or
/// the MCP endpoint URL, and the required scopes.
pub async fn verify_bearer(ctx: &OidcContext, token: &str, now: Timestamp) -> Result<VerifiedClaims, OidcError> {
    let claims = verify_bearer_for(ctx, token, &ctx.audience, now).await?;
    check_required_scopes(ctx, claims)
}

/// A user's token for another audience (a registered tool server's resource URL, presented to
/// the token API): every rule of [`verify_bearer`] but the broker's `required_scopes`, which
/// are what *our* MCP endpoint demands, not what the tool server's clients were granted.
pub async fn verify_bearer_for(
    ctx: &OidcContext,
    token: &str,
    audience: &str,
    now: Timestamp,
) -> Result<VerifiedClaims, OidcError> {
    verify(ctx, token, now, Expected { audience, id_token: None }).await
}

fn check_required_scopes(ctx: &OidcContext, claims: VerifiedClaims) -> Result<VerifiedClaims, OidcError> {
    let missing = ctx.required_scopes.iter().any(|needed| !claims.scopes.contains(needed));
    if missing {
        // MCP 2025-11-25 §step-up: name what is needed plus what was already granted.
        let mut scope: Vec<&str> = ctx.required_scopes.iter().map(String::as_str).collect();
        for granted in &claims.scopes {
            if !scope.contains(&granted.as_str()) {
                scope.push(granted);
            }
        }
        return Err(OidcError::InsufficientScope { scope: scope.join(" ") });
    }
    Ok(claims)
}

/// An ID token from the sign-in code exchange: audience = our client id, and this sign-in's
/// nonce.
pub async fn verify_id_token(
    ctx: &OidcContext,
    token: &str,
    nonce: &str,
    now: Timestamp,
) -> Result<VerifiedClaims, OidcError> {
    let expected = Expected { audience: &ctx.client_id, id_token: Some((nonce, &ctx.client_id)) };
    verify(ctx, token, now, expected).await
}

/// A bearer token's user: verified, then found or created by (issuer, subject). Logs why a token
/// was refused (debug: it is the client's problem) or why we could not decide (error).
pub async fn authenticate_bearer(
    state: &IdentityContext,
    ctx: &OidcContext,
    token: &str,
) -> Result<AuthenticatedUser, OidcError> {
    user_of(state, verify_bearer(ctx, token, state.now()).await).await
}

/// [`authenticate_bearer`] for a token meant for `audience` (see [`verify_bearer_for`]).
pub async fn authenticate_bearer_for(
    state: &IdentityContext,
    ctx: &OidcContext,
    token: &str,
    audience: &str,
) -> Result<AuthenticatedUser, OidcError> {
    user_of(state, verify_bearer_for(ctx, token, audience, state.now()).await).await
}

async fn user_of(
    state: &IdentityContext,
    verified: Result<VerifiedClaims, OidcError>,
) -> Result<AuthenticatedUser, OidcError> {
    let now = state.now();
    let claims = match verified {
        Ok(claims) => claims,
        Err(error) => {
            if error.is_unavailable() {
                tracing::error!(%error, "could not verify a bearer token: the OIDC issuer is unavailable (503)");
            } else {
                tracing::debug!(%error, "bearer token rejected");
            }
            return Err(error);
        }
    };
    let user = state.store.users().upsert_external(&claims.issuer, &claims.subject, now).await.map_err(|error| {
        tracing::error!(%error, "user lookup failed");
        OidcError::Store(error)
    })?;
    Ok(AuthenticatedUser {
        user_id: user.id,
        issuer: user.issuer,
        subject: user.subject,
        display_name: claims.display_name,
        client: match claims.client_id {
            Some(id) => crate::domain::ClientIdentity::OAuthClient(id),
            None => crate::domain::ClientIdentity::Unidentified,
        },
    })
}
