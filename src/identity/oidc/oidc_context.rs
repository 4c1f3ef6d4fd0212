//! [`OidcContext`]: everything oidc mode needs, built once at start-up: the issuer's settings,
//! and its discovery document and keys in one snapshot, refreshed in the background and on an
//! unknown `kid`, never more often than [`MIN_REFRESH_SECONDS`] (see [`super`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use jsonwebtoken::Algorithm;
use secrecy::SecretString;
use url::Url;

use super::discovery::{self, ProviderMetadata};
use super::fetch;
use super::jwks::{self, KeySet, PublicKey};
use super::oidc_error::OidcError;
use crate::clock::{SharedClock, Timestamp};
use crate::config::{Config, IdentityMode};

/// Where the issuer sends the browser back after sign-in (the redirect URI registered there).
pub const CALLBACK_PATH: &str = "/login/oidc/callback";
/// The least time between two fetches of the issuer's metadata and keys.
pub const MIN_REFRESH_SECONDS: i64 = 30;
/// How often keys are refreshed in the background.
pub const BACKGROUND_REFRESH: Duration = Duration::from_secs(10 * 60);

/// The discovery document and keys of one successful fetch.
#[derive(Debug, Default)]
struct Snapshot {
    /// Bumped by every successful fetch, so a request that waited for a refresh can tell that
    /// another one already did it.
    generation: u64,
    metadata: Option<Arc<ProviderMetadata>>,
    keys: Arc<KeySet>,
}

#[derive(Debug, Default)]
struct Gate {
    last_attempt: Option<Timestamp>,
    last_failed: bool,
}

/// Everything oidc mode needs, built once at start-up (see the module docs).
pub struct OidcContext {
    configured_issuer: Url,
    pub(super) client_id: String,
    pub(super) client_secret: Option<SecretString>,
    /// Accepted `aud` of bearer tokens: the configured audience, else the MCP endpoint URL.
    pub(super) audience: String,
    pub(super) required_scopes: Vec<String>,
    scopes_supported: Vec<String>,
    pub(super) leeway: i64,
    pub(super) algorithms: Vec<Algorithm>,
    /// `{public_url}/login/oidc/callback`, registered at the issuer exactly.
    pub(super) redirect_uri: Url,
    /// The MCP endpoint (RFC 9728 `resource`).
    resource: Url,
    pub(super) secure_cookies: bool,
    pub(super) http: reqwest::Client,
    current: RwLock<Arc<Snapshot>>,
    gate: tokio::sync::Mutex<Gate>,
    /// `sha256_hex(state)` of callbacks already handled, until their sign-in would have expired.
    consumed_states: Mutex<HashMap<String, Timestamp>>,
}

impl std::fmt::Debug for OidcContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcContext")
            .field("issuer", &self.configured_issuer.as_str())
            .field("client_id", &self.client_id)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

impl OidcContext {
    /// `Some` in oidc mode. Fails only on settings that `Config` should already have refused.
    pub fn from_config(config: &Config) -> Result<Option<Arc<Self>>, OidcError> {
        let identity = &config.identity;
        if identity.mode != IdentityMode::Oidc {
            return Ok(None);
        }
        let misconfigured = |what: &str| OidcError::BadIssuerResponse(format!("[identity] {what}"));
        let configured_issuer = identity.issuer.clone().ok_or_else(|| misconfigured("issuer is required"))?;
        let client_id = identity.client_id.clone().ok_or_else(|| misconfigured("client_id is required"))?;
        let mut algorithms = Vec::new();
        for name in &identity.algorithms {
            let alg: Algorithm = name.parse().map_err(|_| misconfigured(&format!("algorithm {name} is not known")))?;
            if matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) {
                return Err(misconfigured("HMAC algorithms are never accepted"));
            }
            algorithms.push(alg);
        }
        let scopes_supported = if identity.scopes_supported.is_empty() {
            identity.required_scopes.clone()
        } else {
            identity.scopes_supported.clone()
        };
        Ok(Some(Arc::new(Self {
            configured_issuer,
            client_id,
            client_secret: identity.client_secret.clone(),
            audience: identity.audience.clone().unwrap_or_else(|| config.mcp_url().to_string()),
            required_scopes: identity.required_scopes.clone(),
            scopes_supported,
            leeway: i64::try_from(identity.leeway.as_secs()).unwrap_or(60),
            algorithms,
            redirect_uri: config.url(CALLBACK_PATH),
            resource: config.mcp_url(),
            secure_cookies: config.secure_cookies(),
            http: fetch::http_client()?,
            current: RwLock::new(Arc::new(Snapshot::default())),
            gate: tokio::sync::Mutex::new(Gate::default()),
            consumed_states: Mutex::new(HashMap::new()),
        })))
    }

    /// Fetches the issuer's metadata and keys once (a failure is logged, and retried on first
    /// use), then refreshes them every [`BACKGROUND_REFRESH`] until `shutdown`.
    pub async fn start(self: &Arc<Self>, clock: SharedClock, shutdown: tokio_util::sync::CancellationToken) {
        // A failure is logged by `refresh`; the first request retries.
        if let Ok(snapshot) = self.refresh(clock.now(), self.snapshot().generation).await {
            tracing::info!(
                issuer = snapshot.metadata.as_ref().map(|m| m.issuer.as_str()).unwrap_or_default(),
                keys = snapshot.keys.len(),
                "loaded the OIDC issuer's metadata and signing keys"
            );
        }
        let every = crate::every::Every::new(self, BACKGROUND_REFRESH, shutdown);
        tokio::spawn(async move {
            while let Some(this) = every.tick().await {
                let _ = this.refresh(clock.now(), this.snapshot().generation).await;
            }
        });
    }

    /// The issuer as clients should see it (RFC 9728 `authorization_servers`): its own spelling
    /// once discovered, else the configured URL without a trailing slash.
    pub fn issuer(&self) -> String {
        match &self.snapshot().metadata {
            Some(metadata) => metadata.issuer.clone(),
            None => discovery::issuer_spellings(&self.configured_issuer).swap_remove(0),
        }
    }

    /// The audiences the broker itself accepts from this issuer: bearer tokens for /mcp, and ID
    /// tokens (our client id). A tool server's resource must be neither.
    pub fn own_audiences(&self) -> [&str; 2] {
        [&self.audience, &self.client_id]
    }

    /// Scopes every bearer token must carry.
    pub fn required_scopes(&self) -> &[String] {
        &self.required_scopes
    }

    /// RFC 9728 §2 protected-resource metadata for the MCP endpoint in oidc mode: the issuer is
    /// the authorization server, `resource` is exactly the MCP endpoint URL.
    pub fn resource_metadata(&self) -> serde_json::Value {
        let mut body = serde_json::json!({
            "resource": self.resource.as_str(),
            "authorization_servers": [self.issuer()],
            "bearer_methods_supported": ["header"],
            "resource_name": "oauth-broker",
        });
        if !self.scopes_supported.is_empty() {
            body["scopes_supported"] = serde_json::json!(self.scopes_supported);
        }
        body
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        match self.current.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The metadata, fetching it if we never could.
    pub(super) async fn metadata(&self, now: Timestamp) -> Result<Arc<ProviderMetadata>, OidcError> {
        let snapshot = self.snapshot();
        if let Some(metadata) = &snapshot.metadata {
            return Ok(metadata.clone());
        }
        let fresh = self.refresh(now, snapshot.generation).await?;
        fresh.metadata.clone().ok_or_else(|| OidcError::Unavailable("no metadata yet".into()))
    }

    /// The issuer's spelling and the key for a token's `kid`: from the cache, else after one
    /// (rate-limited) refresh — a key rotation at the issuer.
    pub(super) async fn key_for(&self, kid: Option<&str>, now: Timestamp) -> Result<(String, PublicKey), OidcError> {
        let snapshot = self.snapshot();
        if let (Some(metadata), Some(key)) = (&snapshot.metadata, snapshot.keys.find(kid)) {
            return Ok((metadata.issuer.clone(), key.clone()));
        }
        let fresh = match self.refresh(now, snapshot.generation).await {
            Ok(fresh) => fresh,
            // Refreshed a moment ago: the kid really is unknown.
            Err(RefreshError::Throttled { last_failed: false }) if snapshot.metadata.is_some() => {
                return Err(OidcError::UnknownKey);
            }
            Err(error) => return Err(error.into()),
        };
        match (&fresh.metadata, fresh.keys.find(kid)) {
            (Some(metadata), Some(key)) => Ok((metadata.issuer.clone(), key.clone())),
            _ => Err(OidcError::UnknownKey),
        }
    }

    /// Fetches metadata and keys unless another request did since we saw generation `seen`, or
    /// the last attempt was less than [`MIN_REFRESH_SECONDS`] ago.
    async fn refresh(&self, now: Timestamp, seen: u64) -> Result<Arc<Snapshot>, RefreshError> {
        let mut gate = self.gate.lock().await;
        let current = self.snapshot();
        if current.generation != seen {
            return Ok(current);
        }
        if let Some(last) = gate.last_attempt
            && now - last < MIN_REFRESH_SECONDS
        {
            return Err(RefreshError::Throttled { last_failed: gate.last_failed });
        }
        gate.last_attempt = Some(now);
        match self.fetch(&current).await {
            Ok((metadata, keys)) => {
                gate.last_failed = false;
                let next = Arc::new(Snapshot { generation: current.generation + 1, metadata: Some(metadata), keys });
                match self.current.write() {
                    Ok(mut guard) => *guard = next.clone(),
                    Err(poisoned) => *poisoned.into_inner() = next.clone(),
                }
                tracing::debug!(keys = next.keys.len(), "refreshed the OIDC issuer's signing keys");
                Ok(next)
            }
            Err(error) => {
                gate.last_failed = true;
                tracing::error!(
                    issuer = %self.configured_issuer, %error,
                    "could not fetch the OIDC issuer's metadata or keys; tokens signed with keys not cached \
                     are answered 503 until it can be reached (next try in {MIN_REFRESH_SECONDS} s or later)"
                );
                Err(RefreshError::Failed(error))
            }
        }
    }

    async fn fetch(&self, current: &Snapshot) -> Result<(Arc<ProviderMetadata>, Arc<KeySet>), OidcError> {
        let metadata = match discovery::fetch(&self.http, &self.configured_issuer).await {
            Ok(metadata) => Arc::new(metadata),
            // The keys may still be reachable where they were.
            Err(error) if current.metadata.is_some() && !matches!(error, OidcError::BadIssuerResponse(_)) => {
                tracing::warn!(%error, "OIDC discovery failed; using the cached document");
                current.metadata.clone().ok_or(error)?
            }
            Err(error) => return Err(error),
        };
        let keys = jwks::fetch(&self.http, &metadata.jwks_uri).await?;
        Ok((metadata, Arc::new(keys)))
    }

    /// Records a callback's state as used; `false` if it already was (replay).
    pub(super) fn consume_state(&self, state_hash: String, until: Timestamp, now: Timestamp) -> bool {
        let mut consumed = match self.consumed_states.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        consumed.retain(|_, expires| *expires > now);
        consumed.insert(state_hash, until).is_none()
    }
}

#[derive(Debug)]
enum RefreshError {
    Throttled { last_failed: bool },
    Failed(OidcError),
}

impl From<RefreshError> for OidcError {
    fn from(error: RefreshError) -> Self {
        match error {
            RefreshError::Throttled { .. } => OidcError::Unavailable(format!(
                "the issuer's keys could not be loaded; retrying at most every {MIN_REFRESH_SECONDS} s"
            )),
            RefreshError::Failed(error) => error,
        }
    }
}
