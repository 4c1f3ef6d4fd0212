//! The issuer's signing keys (RFC 7517 JWK set), parsed once per fetch into verification keys.
//!
//! Only signature keys we can use safely are kept: RSA of at least 2048 bits, EC on P-256 or
//! P-384, Ed25519. Symmetric (`oct`) keys are dropped whatever the document says: a published
//! HMAC key would let anyone sign. Keys marked for encryption (`use: enc`, or an encryption
//! `alg`) are dropped too. Keys we cannot parse are skipped one by one, so one odd key in an
//! issuer's set does not lock every user out. Fetching, caching and the refresh rate limit are in
//! [`super::OidcContext`].

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;
use url::Url;

use super::fetch::get_json;
use super::oidc_error::OidcError;

/// Key sets are a few kilobytes; refuse anything much larger.
const MAX_JWKS_BYTES: usize = 512 * 1024;
/// And no more keys than any real issuer publishes.
const MAX_KEYS: usize = 64;
const MIN_RSA_BITS: usize = 2048;

/// What a key is, which decides the algorithms it may verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Rsa,
    P256,
    P384,
    Ed25519,
}

impl KeyKind {
    /// RFC 7518 §3.1: the key type (and curve) each algorithm requires.
    pub fn fits(self, alg: Algorithm) -> bool {
        use Algorithm as A;
        match self {
            KeyKind::Rsa => matches!(alg, A::RS256 | A::RS384 | A::RS512 | A::PS256 | A::PS384 | A::PS512),
            KeyKind::P256 => alg == A::ES256,
            KeyKind::P384 => alg == A::ES384,
            KeyKind::Ed25519 => alg == A::EdDSA,
        }
    }
}

/// One verification key.
#[derive(Clone)]
pub struct PublicKey {
    pub kid: Option<String>,
    pub kind: KeyKind,
    /// The JWK's own `alg`, when it names one: the key then verifies only that algorithm.
    pub alg: Option<Algorithm>,
    pub decoding: DecodingKey,
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublicKey").field("kid", &self.kid).field("kind", &self.kind).field("alg", &self.alg).finish()
    }
}

impl PublicKey {
    /// Whether this key may verify a token signed with `alg`.
    pub fn accepts(&self, alg: Algorithm) -> bool {
        self.kind.fits(alg) && self.alg.is_none_or(|own| own == alg)
    }
}

/// The usable keys of one fetch.
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    keys: Vec<PublicKey>,
}

#[derive(Deserialize)]
struct Document {
    keys: Vec<serde_json::Value>,
}

impl KeySet {
    /// The usable keys of a JWK set document (see the module docs for what is dropped).
    pub fn from_document(document: serde_json::Value) -> Result<Self, OidcError> {
        let document: Document = serde_json::from_value(document)
            .map_err(|_| OidcError::BadIssuerResponse("the JWK set has no `keys` array".into()))?;
        let mut keys = Vec::new();
        for value in document.keys.into_iter().take(MAX_KEYS) {
            match parse_key(value) {
                Ok(key) => keys.push(key),
                Err(why) => tracing::debug!(why, "skipping a key of the issuer's JWK set"),
            }
        }
        Ok(Self { keys })
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key named `kid`. A token without `kid` is only accepted when the set holds exactly
    /// one key (OIDC Core §10.1: `kid` is required once there are several).
    pub fn find(&self, kid: Option<&str>) -> Option<&PublicKey> {
        match kid {
            Some(kid) => self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)),
            None if self.keys.len() == 1 => self.keys.first(),
            None => None,
        }
    }
}

fn parse_key(value: serde_json::Value) -> Result<PublicKey, &'static str> {
    let jwk: Jwk = serde_json::from_value(value).map_err(|_| "unparseable or unsupported key")?;
    if matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
        return Err("not a signature key");
    }
    let alg = match jwk.common.key_algorithm {
        Some(alg) => Some(signature_algorithm(alg).ok_or("not a signature algorithm")?),
        None => None,
    };
    let kind = match &jwk.algorithm {
        AlgorithmParameters::RSA(params) => {
            let modulus = URL_SAFE_NO_PAD.decode(params.n.trim_end_matches('=')).map_err(|_| "bad RSA modulus")?;
            let significant = modulus.iter().skip_while(|b| **b == 0).count();
            if significant * 8 < MIN_RSA_BITS {
                return Err("RSA key shorter than 2048 bits");
            }
            KeyKind::Rsa
        }
        AlgorithmParameters::EllipticCurve(params) => match params.curve {
            EllipticCurve::P256 => KeyKind::P256,
            EllipticCurve::P384 => KeyKind::P384,
            _ => return Err("unsupported curve"),
        },
        AlgorithmParameters::OctetKeyPair(params) => match params.curve {
            EllipticCurve::Ed25519 => KeyKind::Ed25519,
            _ => return Err("unsupported curve"),
        },
        AlgorithmParameters::OctetKey(_) => return Err("symmetric key"),
    };
    if let Some(alg) = alg
        && !kind.fits(alg)
    {
        return Err("the key's alg does not fit its type");
    }
    let decoding = DecodingKey::from_jwk(&jwk).map_err(|_| "key material does not parse")?;
    Ok(PublicKey { kid: jwk.common.key_id, kind, alg, decoding })
}

/// The JWS algorithm a JWK's `alg` names; `None` for encryption algorithms.
fn signature_algorithm(alg: KeyAlgorithm) -> Option<Algorithm> {
    use KeyAlgorithm as K;
    Some(match alg {
        K::HS256 => Algorithm::HS256,
        K::HS384 => Algorithm::HS384,
        K::HS512 => Algorithm::HS512,
        K::ES256 => Algorithm::ES256,
        K::ES384 => Algorithm::ES384,
        K::RS256 => Algorithm::RS256,
        K::RS384 => Algorithm::RS384,
        K::RS512 => Algorithm::RS512,
        K::PS256 => Algorithm::PS256,
        K::PS384 => Algorithm::PS384,
        K::PS512 => Algorithm::PS512,
        K::EdDSA => Algorithm::EdDSA,
        K::RSA1_5 | K::RSA_OAEP | K::RSA_OAEP_256 | K::UNKNOWN_ALGORITHM => return None,
    })
}

/// Fetches and parses the key set at `url`. An empty result is an error: the issuer is
/// misconfigured, and keeping the previous keys is better than accepting nothing.
pub async fn fetch(http: &reqwest::Client, url: &Url) -> Result<KeySet, OidcError> {
    let document: serde_json::Value = get_json(http, url, MAX_JWKS_BYTES).await?;
    let keys = KeySet::from_document(document)?;
    if keys.is_empty() {
        return Err(OidcError::BadIssuerResponse("the JWK set holds no usable signing key".into()));
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ed_key(kid: &str) -> serde_json::Value {
        json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": URL_SAFE_NO_PAD.encode([7u8; 32])})
    }

    #[test]
    fn symmetric_encryption_and_short_keys_are_dropped_and_the_rest_kept() {
        let short_rsa = json!({"kty": "RSA", "kid": "short", "n": URL_SAFE_NO_PAD.encode([0xc5u8; 128]), "e": "AQAB"});
        let set = KeySet::from_document(json!({"keys": [
            {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
            {"kty": "RSA", "kid": "enc", "use": "enc", "n": URL_SAFE_NO_PAD.encode([0xc5u8; 256]), "e": "AQAB"},
            {"kty": "RSA", "kid": "oaep", "alg": "RSA-OAEP", "n": URL_SAFE_NO_PAD.encode([0xc5u8; 256]), "e": "AQAB"},
            short_rsa,
            {"kty": "EC", "kid": "p521", "crv": "P-521", "x": "AA", "y": "AA"},
            {"kty": "weird", "kid": "weird"},
            {"kty": "RSA", "kid": "good-rsa", "n": URL_SAFE_NO_PAD.encode([0xc5u8; 256]), "e": "AQAB"},
            ed_key("good-ed"),
        ]}))
        .unwrap();
        assert_eq!(set.len(), 2);
        assert!(set.find(Some("good-rsa")).is_some());
        assert!(set.find(Some("good-ed")).is_some());
        for dropped in ["hmac", "enc", "oaep", "short", "p521", "weird"] {
            assert!(set.find(Some(dropped)).is_none(), "{dropped} must be dropped");
        }
    }

    #[test]
    fn a_key_verifies_only_algorithms_of_its_type_and_its_own_alg() {
        let set = KeySet::from_document(json!({"keys": [
            {"kty": "RSA", "kid": "rs", "alg": "RS256", "n": URL_SAFE_NO_PAD.encode([0xc5u8; 256]), "e": "AQAB"},
            ed_key("ed"),
        ]}))
        .unwrap();
        let rs = set.find(Some("rs")).unwrap();
        assert!(rs.accepts(Algorithm::RS256));
        assert!(!rs.accepts(Algorithm::PS256), "the JWK pins RS256");
        assert!(!rs.accepts(Algorithm::HS256));
        assert!(!rs.accepts(Algorithm::ES256));
        let ed = set.find(Some("ed")).unwrap();
        assert!(ed.accepts(Algorithm::EdDSA));
        assert!(!ed.accepts(Algorithm::RS256));
    }

    #[test]
    fn a_token_without_kid_needs_a_single_key_set() {
        let one = KeySet::from_document(json!({"keys": [ed_key("a")]})).unwrap();
        assert!(one.find(None).is_some());
        let two = KeySet::from_document(json!({"keys": [ed_key("a"), ed_key("b")]})).unwrap();
        assert!(two.find(None).is_none());
    }
}
