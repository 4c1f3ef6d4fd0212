//! The broker's own bearer tokens (local identity mode): EdDSA (Ed25519) JWTs with `iss` = the
//! public URL and `aud` = the MCP endpoint URL. Keys live in the database (private half sealed),
//! so every instance and the `admin tokens issue` command sign with the same key.
//!
//! Verification pins the algorithm (EdDSA only: never `none`, never HMAC with a public key),
//! checks signature, `iss`, `aud`, `exp` (30 s leeway) and requires `sub`.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::SigningKey;
use ed25519_dalek::pkcs8::EncodePrivateKey;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rand::rngs::OsRng;
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;
use crate::crypto::{SealContext, Sealer};
use crate::store::Store;
use crate::store::sealing::SigningKeyRow;

pub const LEEWAY_SECONDS: u64 = 30;

#[derive(Debug, thiserror::Error)]
pub enum JwtError {
    #[error("token is malformed")]
    Malformed,
    #[error("token is signed with an unknown key")]
    UnknownKey,
    #[error("token signature, algorithm or claims are invalid: {0}")]
    Invalid(String),
    #[error("token has expired")]
    Expired,
    #[error("could not sign token")]
    Signing,
    #[error("key store: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("key material: {0}")]
    Crypto(#[from] crate::crypto::CryptoError),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub sub: String,
    pub aud: String,
    pub exp: i64,
    pub iat: i64,
    pub jti: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Set on tokens the built-in authorization server issued: the delegation they belong to (the
    /// user's approval of the client, claim `grant_id`), so a revoked delegation (code or
    /// refresh-token replay, the user ending the app's access) stops its access tokens at once.
    #[serde(default, rename = "grant_id", skip_serializing_if = "Option::is_none")]
    pub delegation_id: Option<String>,
    /// Set on the authorization server's tokens (with `grant_id`): the OAuth client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Set on operator-issued tokens made with `admin tokens issue --client LABEL`: which
    /// program the operator made it for, so consents to use connections stay per program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_label: Option<String>,
}

impl Claims {
    /// The client this token was issued to. Only the authorization server's tokens (which
    /// carry a `grant_id`) name an OAuth client; anything else is an operator-issued token.
    pub fn client(&self) -> crate::domain::ClientIdentity {
        match (&self.delegation_id, &self.client_id) {
            (Some(_), Some(client_id)) => crate::domain::ClientIdentity::OAuthClient(client_id.clone()),
            _ => crate::domain::ClientIdentity::IssuedToken(self.client_label.clone()),
        }
    }
}

struct KeyPair {
    kid: String,
    encoding: EncodingKey,
}

/// The longest a token the broker signs can live (`admin tokens issue --ttl` allows up to
/// 366 days; every other token is shorter): a retired signing key keeps verifying, and stays
/// in the JWKS, this long after its retirement, then it is dropped.
pub const MAX_TOKEN_LIFETIME_SECONDS: i64 = 366 * 24 * 3600;

/// What signs and what verifies, swapped whole when the keys are read again.
struct KeySet {
    active: KeyPair,
    verifying: HashMap<String, ([u8; 32], DecodingKey)>,
}

/// Signing and verification keys, loaded at start-up and read again after a rotation
/// ([`TokenKeys::reload`]).
pub struct TokenKeys {
    issuer: String,
    audience: String,
    set: std::sync::RwLock<Arc<KeySet>>,
}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenKeys").field("issuer", &self.issuer).field("active_kid", &self.active_kid()).finish()
    }
}

/// Where a signing key's private half is sealed (also for `admin keys rewrap`).
pub(crate) fn key_context(kid: &str) -> SealContext<'_> {
    SealContext { table: "signing_keys", column: "private_key", row_id: kid, owner: "broker" }
}

impl TokenKeys {
    /// Loads the keys from the database, creating the first one if there is none.
    pub async fn load_or_create(
        store: &Store,
        sealer: &Sealer,
        issuer: String,
        audience: String,
        now: Timestamp,
    ) -> Result<Self, JwtError> {
        if !store.signing_keys().all().await?.iter().any(|r| r.retired_at.is_none()) {
            let row = generate_key_row(sealer, now)?;
            store.signing_keys().insert(&row).await?;
        }
        let set = load_set(store, sealer, now).await?;
        Ok(Self { issuer, audience, set: std::sync::RwLock::new(Arc::new(set)) })
    }

    /// Reads the keys again (after `admin keys rotate-signing` in another process): the newest
    /// active key signs from now on; retired keys verify until [`MAX_TOKEN_LIFETIME_SECONDS`]
    /// after their retirement. Whether the signing key changed.
    pub async fn reload(&self, store: &Store, sealer: &Sealer, now: Timestamp) -> Result<bool, JwtError> {
        let set = load_set(store, sealer, now).await?;
        let changed = set.active.kid != self.active_kid();
        match self.set.write() {
            Ok(mut current) => *current = Arc::new(set),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(set),
        }
        Ok(changed)
    }

    /// Makes a new signing key and retires the others in one transaction; tokens they signed
    /// keep verifying until they expire. The new key's id.
    pub async fn rotate(store: &Store, sealer: &Sealer, now: Timestamp) -> Result<String, JwtError> {
        let row = generate_key_row(sealer, now)?;
        store.signing_keys().rotate(&row, now, now - MAX_TOKEN_LIFETIME_SECONDS).await?;
        Ok(row.kid)
    }

    fn current(&self) -> Arc<KeySet> {
        // The set is swapped whole, so a poisoned lock still holds a usable one.
        self.set.read().map_or_else(|poisoned| poisoned.into_inner().clone(), |set| set.clone())
    }

    /// The id of the key that signs.
    pub fn active_kid(&self) -> String {
        self.current().active.kid.clone()
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// A bearer token for `subject`, valid for `ttl_seconds` from `now`.
    pub fn issue(
        &self,
        subject: &str,
        name: Option<&str>,
        now: Timestamp,
        ttl_seconds: i64,
    ) -> Result<String, JwtError> {
        self.issue_labelled(subject, name, None, now, ttl_seconds)
    }

    /// [`TokenKeys::issue`] for one named program (`client_label`): consents to use the user's
    /// connections are then kept for that program alone.
    pub fn issue_labelled(
        &self,
        subject: &str,
        name: Option<&str>,
        client_label: Option<&str>,
        now: Timestamp,
        ttl_seconds: i64,
    ) -> Result<String, JwtError> {
        self.issue_for_audience(subject, name, client_label, &self.audience, now, ttl_seconds)
    }

    /// [`TokenKeys::issue_labelled`] for another audience: a registered tool server's resource
    /// URL (`admin tokens issue --audience`), so the user can call that tool server, which
    /// presents the token to the token API.
    pub fn issue_for_audience(
        &self,
        subject: &str,
        name: Option<&str>,
        client_label: Option<&str>,
        audience: &str,
        now: Timestamp,
        ttl_seconds: i64,
    ) -> Result<String, JwtError> {
        let claims = Claims {
            iss: self.issuer.clone(),
            sub: subject.to_owned(),
            aud: audience.to_owned(),
            exp: now + ttl_seconds,
            iat: now,
            jti: uuid::Uuid::new_v4().to_string(),
            name: name.map(str::to_owned),
            delegation_id: None,
            client_id: None,
            client_label: client_label.map(str::to_owned),
        };
        let set = self.current();
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(set.active.kid.clone());
        jsonwebtoken::encode(&header, &claims, &set.active.encoding).map_err(|_| JwtError::Signing)
    }

    /// Verifies a token against `now` (the injected clock, not the system time).
    pub fn verify(&self, token: &str, now: Timestamp) -> Result<Claims, JwtError> {
        self.verify_for(token, &self.audience, now)
    }

    /// [`TokenKeys::verify`] for another audience: a user's token for a registered tool server
    /// (its resource URL), presented to the token API. Every other rule is the same.
    pub fn verify_for(&self, token: &str, audience: &str, now: Timestamp) -> Result<Claims, JwtError> {
        self.verify_with(token, Some(audience), now)
    }

    /// [`TokenKeys::verify`] whatever the audience (ours or a tool server's): for revocation
    /// (RFC 7009) only, where the client proves it holds a token we issued, not that it may use
    /// it here. Never for authentication.
    pub fn verify_any_audience(&self, token: &str, now: Timestamp) -> Result<Claims, JwtError> {
        self.verify_with(token, None, now)
    }

    fn verify_with(&self, token: &str, audience: Option<&str>, now: Timestamp) -> Result<Claims, JwtError> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| JwtError::Malformed)?;
        if header.alg != Algorithm::EdDSA {
            return Err(JwtError::Invalid(format!("algorithm {:?} is not accepted", header.alg)));
        }
        let kid = header.kid.ok_or(JwtError::UnknownKey)?;
        let set = self.current();
        let (_, key) = set.verifying.get(&kid).ok_or(JwtError::UnknownKey)?;
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.set_issuer(&[&self.issuer]);
        match audience {
            Some(audience) => validation.set_audience(&[audience]),
            None => validation.validate_aud = false,
        }
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        // Expiry is checked below against the injected clock.
        validation.validate_exp = false;
        let data =
            jsonwebtoken::decode::<Claims>(token, key, &validation).map_err(|e| JwtError::Invalid(e.to_string()))?;
        if data.claims.exp + LEEWAY_SECONDS as i64 <= now {
            return Err(JwtError::Expired);
        }
        if data.claims.iat > now + LEEWAY_SECONDS as i64 {
            return Err(JwtError::Invalid("token issued in the future".into()));
        }
        if data.claims.sub.is_empty() {
            return Err(JwtError::Invalid("empty sub".into()));
        }
        Ok(data.claims)
    }

    /// The public keys as a JWK set (RFC 7517), for clients and other servers.
    pub fn jwks(&self) -> serde_json::Value {
        let mut keys: Vec<_> = self.current().verifying.iter().map(|(kid, (raw, _))| jwk(kid, raw)).collect();
        keys.sort_by(|a, b| a["kid"].as_str().cmp(&b["kid"].as_str()));
        serde_json::json!({ "keys": keys })
    }
}

fn jwk(kid: &str, public_raw: &[u8; 32]) -> serde_json::Value {
    serde_json::json!({ "kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": kid, "x": URL_SAFE_NO_PAD.encode(public_raw) })
}

/// The keys in the database as of `now`: the newest active one signs; every key verifies
/// unless it was retired more than [`MAX_TOKEN_LIFETIME_SECONDS`] ago.
async fn load_set(store: &Store, sealer: &Sealer, now: Timestamp) -> Result<KeySet, JwtError> {
    let rows = store.signing_keys().all().await?;
    let mut verifying = HashMap::new();
    let mut active = None;
    for row in &rows {
        if row.retired_at.is_some_and(|retired| retired + MAX_TOKEN_LIFETIME_SECONDS <= now) {
            continue;
        }
        let public_raw: [u8; 32] = row.public_key.as_slice().try_into().map_err(|_| JwtError::Malformed)?;
        verifying.insert(row.kid.clone(), (public_raw, DecodingKey::from_ed_der(&public_raw)));
        if row.retired_at.is_none() && active.is_none() {
            let der = secrecy::SecretBox::new(Box::new(sealer.open(&row.private_key_sealed, key_context(&row.kid))?));
            active = Some(KeyPair { kid: row.kid.clone(), encoding: EncodingKey::from_ed_der(der.expose_secret()) });
        }
    }
    let active = active.ok_or(JwtError::UnknownKey)?;
    Ok(KeySet { active, verifying })
}

fn generate_key_row(sealer: &Sealer, now: Timestamp) -> Result<SigningKeyRow, JwtError> {
    let signing = SigningKey::generate(&mut OsRng);
    let der = signing.to_pkcs8_der().map_err(|_| JwtError::Signing)?;
    let public_raw = signing.verifying_key().to_bytes();
    let kid = crate::crypto::random_token(12);
    Ok(SigningKeyRow {
        private_key_sealed: sealer.seal(der.as_bytes(), key_context(&kid)),
        kid,
        algorithm: "EdDSA".into(),
        public_key: public_raw.to_vec(),
        created_at: now,
        retired_at: None,
    })
}

/// Claims of an access token the built-in authorization server issues to an MCP client
/// ([`crate::authorization_server`]): the claims of [`Claims`] plus the client, the granted
/// scope and the delegation it descends from (RFC 9068 §2.2). [`TokenKeys::verify`] accepts these
/// tokens like any other and ignores the extra claims.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientAccessClaims {
    pub iss: String,
    pub sub: String,
    pub aud: String,
    pub exp: i64,
    pub iat: i64,
    pub jti: String,
    pub client_id: String,
    /// Space-separated; absent when no scope was granted.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scope: String,
    /// The delegation (`oauth_grants.id`, claim `grant_id`), so a bearer check can refuse tokens
    /// of a revoked one ([`crate::store::authorization_server::OAuthGrants::is_active`]).
    #[serde(rename = "grant_id")]
    pub delegation_id: String,
}

/// What a delegation (a user's approval of an MCP client at the authorization server) puts in
/// its access tokens.
#[derive(Debug, Clone, Copy)]
pub struct ClientDelegation<'a> {
    pub client_id: &'a str,
    /// Space-separated.
    pub scope: &'a str,
    pub delegation_id: &'a str,
    /// The RFC 8707 resource: the MCP endpoint URL or a registered tool server's.
    pub audience: &'a str,
}

impl TokenKeys {
    /// An access token for `subject` issued to MCP client `client_id` with `scope`, valid for
    /// `ttl_seconds` from `now`, for `audience` (the delegation's RFC 8707 resource).
    pub fn issue_for_client(
        &self,
        subject: &str,
        delegation: &ClientDelegation<'_>,
        now: Timestamp,
        ttl_seconds: i64,
    ) -> Result<String, JwtError> {
        let claims = ClientAccessClaims {
            iss: self.issuer.clone(),
            sub: subject.to_owned(),
            aud: delegation.audience.to_owned(),
            exp: now + ttl_seconds,
            iat: now,
            jti: uuid::Uuid::new_v4().to_string(),
            client_id: delegation.client_id.to_owned(),
            scope: delegation.scope.to_owned(),
            delegation_id: delegation.delegation_id.to_owned(),
        };
        let set = self.current();
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(set.active.kid.clone());
        // RFC 9068 §2.1: access tokens are typed, so they cannot be confused with other JWTs.
        header.typ = Some("at+jwt".into());
        jsonwebtoken::encode(&header, &claims, &set.active.encoding).map_err(|_| JwtError::Signing)
    }
}
