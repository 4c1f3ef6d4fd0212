//! The browser leg of the authorization flow.
//!
//! ```text
//! consent POST ─ begin ──▶ state (32 random bytes) + PKCE verifier; store sha256(state), the
//!                          approving browser session's hash and the sealed verifier; 303 → provider
//! provider ─▶ /oauth/callback ─ complete ──▶ state → row; same browser; unexpired; iss;
//!                          consume state (once); error? → failed; exchange code + verifier;
//!                          tokens sealed into the grant; row completed; event
//! ```
//!
//! The web handlers only translate HTTP to these calls and [`FlowError`]s to pages. Nothing
//! here logs or returns a state, code, verifier or token.

use crate::store::webhooks::EventType;
use secrecy::{ExposeSecret, SecretString};
use url::Url;

use super::core::Core;
use super::provider_apps::{self, AppError};
use crate::broker::{consent, tokens};
use crate::crypto::{SealContext, constant_time_eq, random_token, sha256_hex};
use crate::error_chain::{BoxError, Chain, because};
use crate::events::AuthorizationFinished;
use crate::identity::ClientIdentity;
use crate::identity::browser::BrowserSession;
use crate::providers::client::{self, ProviderError};
use crate::store::StoreError;
use crate::store::authorizations::{AuthorizationKind, AuthorizationRow, AuthorizationStatus, SentToProvider};
use crate::store::grants::GrantRow;
use crate::store::{
    authorizations::{AllowOutcome, ConnectCompleted},
    grants::NewConsent,
};

#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    /// No row holds this state: missing, forged, or already consumed.
    #[error("unknown or already used state")]
    UnknownState,
    /// The response reached a browser other than the one that approved.
    #[error("the response reached another browser")]
    OtherBrowser,
    #[error("the authorization expired")]
    Expired,
    /// RFC 9207: the response's `iss` is missing or names another server.
    #[error("the response came from an unexpected issuer")]
    IssuerMismatch,
    /// RFC 9700 §4.4.2: the response arrived at another provider's redirect URI than the one
    /// its authorization was sent with (a mix-up).
    #[error("the response arrived at another provider's callback")]
    WrongCallback,
    /// Lost the compare-and-swap on the state: another request consumed it first.
    #[error("the state was already used")]
    AlreadyUsed,
    /// The signed-in user is not the user the authorization was created for.
    #[error("the authorization belongs to another user")]
    WrongUser,
    /// The row is not (or no longer) awaiting consent.
    #[error("the authorization is not awaiting consent")]
    NotActionable,
    #[error("provider {0} is not configured")]
    UnknownProvider(String),
    /// The organization has no app of its own at this provider and the operator keeps theirs
    /// to the default organization (`shared_with_organizations = false`).
    #[error("the organization has no app of its own at {0}")]
    NoOrganizationApp(String),
    /// A consent-only authorization whose connection was removed meanwhile.
    #[error("the connection was removed")]
    GrantGone,
    /// A (client, server) approval whose server was removed meanwhile.
    #[error("the server was removed")]
    ServerGone,
    /// A consent-only authorization whose connection gained scopes since the page was shown.
    #[error("the connection changed")]
    ConnectionChanged,
    /// The provider answered with an error (RFC 6749 §4.1.2.1); the code, sanitised.
    #[error("the provider refused: {0}")]
    ProviderRefused(String),
    /// A response with neither `code` nor `error`.
    #[error("the response carried no code")]
    MissingCode,
    /// This attempt's sealed PKCE verifier could not be opened (tampered, or sealed under a key
    /// no longer held): it cannot be finished, but a new attempt can.
    #[error("the attempt's stored verifier could not be opened")]
    VerifierUnreadable,
    /// The exchange for this response started but never finished (the broker stopped during
    /// it); the row is now failed and the user must start again from the client.
    #[error("the code exchange was interrupted")]
    Interrupted,
    /// The token request failed; a short reason such as `invalid_grant` or `unavailable`.
    #[error("the code exchange failed: {0}")]
    ExchangeFailed(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A failure on our side, with its cause for the log; pages show only that it happened.
    #[error("internal error")]
    Internal(#[source] BoxError),
}

/// The provider's redirect back (RFC 6749 §4.1.2 and §4.1.2.1, RFC 9207 §2).
#[derive(Default, serde::Deserialize)]
pub struct CallbackParams {
    pub code: Option<String>,
    pub state: Option<String>,
    pub iss: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
}

impl std::fmt::Debug for CallbackParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackParams").field("iss", &self.iss).field("error", &self.error).finish_non_exhaustive()
    }
}

/// A finished connection, for the result page.
#[derive(Debug, Clone)]
pub struct Connected {
    pub authorization_id: String,
    pub provider_id: String,
    pub provider_name: String,
}

fn verifier_ctx<'a>(row: &'a AuthorizationRow) -> SealContext<'a> {
    verifier_ctx_of(&row.id, &row.user_id)
}

/// Where an authorization's PKCE verifier is sealed (also for `admin keys rewrap`).
pub(super) fn verifier_ctx_of<'a>(id: &'a str, user_id: &'a str) -> SealContext<'a> {
    SealContext { table: "authorizations", column: "pkce_verifier", row_id: id, owner: user_id }
}

/// Checks shared by approve and decline: the owner, unexpired, still awaiting consent.
pub(crate) fn check_consent(core: &Core, row: &AuthorizationRow, session: &BrowserSession) -> Result<(), FlowError> {
    // MCP 2025-11-25 client/elicitation §Phishing: the user who finishes the flow MUST be the
    // user who started it (the URL may have been forwarded or edited).
    if session.user.id != row.user_id {
        return Err(FlowError::WrongUser);
    }
    if row.is_expired(core.now()) {
        return Err(FlowError::Expired);
    }
    match row.status {
        AuthorizationStatus::Pending | AuthorizationStatus::Redirected => Ok(()),
        _ => Err(FlowError::NotActionable),
    }
}

/// The owner approved on the consent page: returns the provider URL to redirect to.
pub async fn begin(core: &Core, row: &AuthorizationRow, session: &BrowserSession) -> Result<Url, FlowError> {
    check_consent(core, row, session)?;
    if row.kind != AuthorizationKind::Connect {
        return Err(FlowError::NotActionable);
    }
    let provider =
        core.providers.find(&row.provider).ok_or_else(|| FlowError::UnknownProvider(row.provider.clone()))?;
    // An API-key provider has no OAuth to start: its key is entered on the page (`api_key`).
    if provider.is_api_key() {
        return Err(FlowError::NotActionable);
    }
    // MCP 2025-11-25 security best practices §Confused deputy, RFC 9700 §2.1: a random state,
    // stored server-side only now (after consent, right before the redirect), bound to this row
    // and to the approving browser session. RFC 7636 §4.1: a fresh verifier per attempt, sealed
    // to this row and user. Approving again overwrites both, so an older state stops working.
    let oauth_state = random_token(32);
    let verifier = client::new_pkce_verifier();
    // RFC 9700 §4.4.2: a redirect URI of this provider's own, kept with the row, so the
    // response is taken only there and exchanged with exactly it.
    let redirect_uri = core.config.provider_redirect_uri(&provider.id);
    // The app of the organization the authorization acts in (or the operator's), kept with the
    // row so the callback exchanges the code with the very client it was issued to.
    let chosen = match provider_apps::for_connect(core, &row.organization, &provider).await {
        Ok(chosen) => chosen,
        Err(AppError::NoApp { provider_name }) => return Err(FlowError::NoOrganizationApp(provider_name)),
        Err(AppError::Store(e)) => return Err(FlowError::Store(e)),
        Err(e) => return Err(FlowError::Internal(because("the organization's app could not be used", e))),
    };
    let url = client::authorization_url(&chosen.config, &redirect_uri, &row.scopes, &oauth_state, &verifier)
        .map_err(|e| FlowError::Internal(because("the provider's authorization URL could not be built", e)))?;
    let sealed = core.sealer.seal(verifier.expose_secret().as_bytes(), verifier_ctx(row));
    let now = core.now();
    let state_hash = sha256_hex(&oauth_state);
    let sent = SentToProvider {
        state_hash: &state_hash,
        browser_session_hash: &session.id_hash,
        pkce_verifier_sealed: &sealed,
        redirect_uri: redirect_uri.as_str(),
        app_id: chosen.app_id.as_deref(),
    };
    let stored = core.store.authorizations().mark_redirected(&row.id, &sent, now).await?;
    if !stored {
        return Err(FlowError::NotActionable);
    }
    let detail = match &chosen.app_id {
        Some(app) => format!("id={} org_id={} app={app}", row.id, row.organization),
        None => format!("id={} org_id={}", row.id, row.organization),
    };
    core.store
        .audit()
        .record_implied(now, Some(&row.user_id), "authorization.approved", Some(&row.provider), Some(&detail))
        .await?;
    tracing::info!(authorization_id = %row.id, provider = %row.provider, "authorization approved, redirecting to provider");
    Ok(url)
}

/// The grant a consent-only authorization asks to use, as long as it still exists and carries no
/// scope beyond those the row lists (what its page shows). Otherwise the row ends — a tool
/// waiting on it stops waiting — and the error says why.
pub async fn consent_target(core: &Core, row: &AuthorizationRow) -> Result<GrantRow, FlowError> {
    let grant_id = row.grant_id.as_deref().ok_or(FlowError::NotActionable)?;
    let grants = core.store.grants().at(&row.user_id, &row.provider).await?;
    let Some(grant) = grants.into_iter().find(|g| g.id == grant_id) else {
        fail(core, row, "grant_gone").await;
        return Err(FlowError::GrantGone);
    };
    // The connection gained scopes after the row was made: approving what it lists would not
    // cover them, so this request ends and the client asks again with the current list.
    if !row.scopes.is_superset_of(&grant.scopes) {
        fail(core, row, "connection_changed").await;
        return Err(FlowError::ConnectionChanged);
    }
    Ok(grant)
}

/// The owner approved a consent-only authorization: the row's client may now use the grant it
/// names, with exactly the scopes the page showed. Nothing goes to the provider. The row and
/// the consent change together, or not at all.
pub async fn allow(core: &Core, row: &AuthorizationRow, session: &BrowserSession) -> Result<(), FlowError> {
    check_consent(core, row, session)?;
    if row.kind != AuthorizationKind::Consent || row.client_key.is_empty() {
        return Err(FlowError::NotActionable);
    }
    let grant = consent_target(core, row).await?;
    let grant_id = grant.id.as_str();
    let client = ClientIdentity::from_key(&row.client_key);
    let name = consent::client_name(core, &client).await.to_string();
    let new = NewConsent {
        authorization_id: &row.id,
        grant_id,
        user_id: &row.user_id,
        client_key: &row.client_key,
        client_name: Some(&name),
        scopes: &row.scopes,
    };
    let now = core.now();
    let event = super::connection_events::authorization(row, EventType::AuthorizationCompleted);
    let pair = super::pair_approval::pair_of(row, Some(&name));
    match core.store.authorizations().allow_client(&new, pair.as_ref(), now).noting(event.as_ref(), now).await? {
        AllowOutcome::Allowed => {}
        AllowOutcome::NotPending => return Err(FlowError::NotActionable),
        AllowOutcome::GrantGone => {
            fail(core, row, "grant_gone").await;
            return Err(FlowError::GrantGone);
        }
    }
    let detail = format!("id={} client={} scopes={}", row.id, row.client_key, row.scopes.to_space_separated());
    core.store
        .audit()
        .record_implied(now, Some(&row.user_id), "consent.granted", Some(&row.provider), Some(&detail))
        .await?;
    super::pair_approval::audit_granted(core, row).await?;
    tracing::info!(authorization_id = %row.id, provider = %row.provider, "client allowed to use a connection");
    publish(core, row, "completed");
    Ok(())
}

/// The owner declined on the consent page.
pub async fn decline(core: &Core, row: &AuthorizationRow, session: &BrowserSession) -> Result<(), FlowError> {
    check_consent(core, row, session)?;
    let now = core.now();
    let event = super::connection_events::authorization(row, EventType::AuthorizationDeclined);
    if !core.store.authorizations().decline(&row.id, now).noting(event.as_ref(), now).await? {
        return Err(FlowError::NotActionable);
    }
    let detail = format!("id={}", row.id);
    core.store
        .audit()
        .record_implied(now, Some(&row.user_id), "authorization.declined", Some(&row.provider), Some(&detail))
        .await?;
    tracing::info!(authorization_id = %row.id, provider = %row.provider, "authorization declined");
    publish(core, row, "declined");
    Ok(())
}

/// A callback that connected nothing: why, and which authorization it was for once the browser
/// is known to be the approving owner's (so the web face can show the outcome at a clean
/// address, `None` when the response cannot be tied to this browser's own attempt).
#[derive(Debug)]
pub struct CallbackError {
    pub error: FlowError,
    pub authorization_id: Option<String>,
}

impl From<FlowError> for CallbackError {
    fn from(error: FlowError) -> Self {
        CallbackError { error, authorization_id: None }
    }
}

/// Which callback address a response arrived at.
#[derive(Debug, Clone, Copy)]
pub enum Arrival<'a> {
    /// `/oauth/callback`, shared by every provider before each had its own.
    Shared,
    /// `/oauth/callback/{provider}`, as the path names it (unchecked).
    Provider(&'a str),
}

/// The redirect URI `row` was sent to its provider with.
fn sent_with(core: &Core, row: &AuthorizationRow) -> Result<url::Url, FlowError> {
    match &row.redirect_uri {
        Some(uri) => {
            url::Url::parse(uri).map_err(|e| FlowError::Internal(because("the stored redirect_uri is not a URL", e)))
        }
        None => Ok(core.config.redirect_uri()),
    }
}

/// The provider sent the browser back. Every check that can reject the response runs before
/// the token request; once the state is consumed the row ends `completed` or `failed`.
pub async fn complete(
    core: &Core,
    params: &CallbackParams,
    session: Option<&BrowserSession>,
    arrival: Arrival<'_>,
) -> Result<Connected, CallbackError> {
    let (row, state_hash) = own_row(core, params, session).await?;
    // RFC 9700 §4.4.2 (mix-up): the response must arrive where this authorization told its
    // provider to send it. Refused before the state is consumed or any token request, so a
    // response from another provider (which uses its own URI) cannot complete this one.
    let arrived = match arrival {
        Arrival::Shared => Some(core.config.redirect_uri()),
        Arrival::Provider(name) => {
            crate::domain::ProviderId::parse(name).ok().map(|id| core.config.provider_redirect_uri(&id))
        }
    };
    let expected = sent_with(core, &row).map_err(CallbackError::from)?;
    if arrived.as_ref() != Some(&expected) {
        tracing::warn!(authorization_id = %row.id, provider = %row.provider, "callback arrived at another provider's redirect URI");
        return Err(CallbackError { error: FlowError::WrongCallback, authorization_id: None });
    }
    finish(core, params, &row, &state_hash)
        .await
        .map_err(|error| CallbackError { error, authorization_id: Some(row.id.clone()) })
}

/// The row `params.state` belongs to (and the state's hash), if it was approved in this very
/// browser session.
async fn own_row(
    core: &Core,
    params: &CallbackParams,
    session: Option<&BrowserSession>,
) -> Result<(AuthorizationRow, String), FlowError> {
    // RFC 6749 §10.12, RFC 9700 §2.1: a missing or unknown state is rejected outright.
    let oauth_state = params.state.as_deref().filter(|s| !s.is_empty()).ok_or(FlowError::UnknownState)?;
    let state_hash = sha256_hex(oauth_state);
    let row = core.store.authorizations().by_state_hash(&state_hash).await?.ok_or(FlowError::UnknownState)?;
    // RFC 9700 §2.1 / §4.5: the state is bound to the browser session that approved, so a code
    // injected into another browser (or a signed-out one) goes nowhere.
    let same_browser = match (session, row.browser_session_hash.as_deref()) {
        (Some(session), Some(bound)) => {
            constant_time_eq(session.id_hash.as_bytes(), bound.as_bytes()) && session.user.id == row.user_id
        }
        _ => false,
    };
    if !same_browser {
        tracing::warn!(authorization_id = %row.id, "callback from a browser other than the approving one");
        return Err(FlowError::OtherBrowser);
    }
    Ok((row, state_hash))
}

/// The rest of [`complete`], for a row this browser approved.
async fn finish(
    core: &Core,
    params: &CallbackParams,
    row: &AuthorizationRow,
    state_hash: &str,
) -> Result<Connected, FlowError> {
    let now = core.now();
    // The state was consumed already: a reload while the exchange runs, or after the process
    // stopped during it. The code cannot be used twice either way.
    if row.status == AuthorizationStatus::Exchanging {
        if exchange_interrupted(row, now) {
            fail(core, row, INTERRUPTED).await;
            return Err(FlowError::Interrupted);
        }
        return Err(FlowError::AlreadyUsed);
    }
    if row.is_expired(now) {
        return Err(FlowError::Expired);
    }
    let operator_app =
        core.providers.find(&row.provider).ok_or_else(|| FlowError::UnknownProvider(row.provider.clone()))?;
    // The app the browser was sent with (the row names it): its issuer, token endpoint and
    // client take the code.
    let app = match provider_apps::of_version(core, &row.organization, row.app_id.as_deref(), &operator_app).await {
        Ok(app) => app,
        Err(AppError::Store(e)) => return Err(FlowError::Store(e)),
        Err(e) => return Err(FlowError::Internal(because("the organization's app could not be used", e))),
    };
    let provider = app.unwrap_or(operator_app);
    // RFC 9207 §2.4, RFC 9700 §4.4.2.1 (mix-up): a provider with a known issuer must name it in
    // every response, errors included; compared as plain strings.
    if let Some(expected) = &provider.issuer
        && params.iss.as_deref() != Some(expected.as_str())
    {
        tracing::warn!(authorization_id = %row.id, provider = %row.provider, "callback issuer mismatch");
        return Err(FlowError::IssuerMismatch);
    }
    // MCP 2025-11-25 security best practices: state is single-use (compare-and-swap).
    if !core.store.authorizations().consume_state(&row.id, state_hash, now).await? {
        return Err(FlowError::AlreadyUsed);
    }
    // RFC 6749 §4.1.2.1: the provider refused (the user denied, or a bad request).
    if let Some(error) = params.error.as_deref() {
        let code = error_code(error);
        fail(core, row, &format!("provider_error:{code}")).await;
        return Err(FlowError::ProviderRefused(code));
    }
    let Some(code) = params.code.as_deref().filter(|c| !c.is_empty()) else {
        fail(core, row, "missing_code").await;
        return Err(FlowError::MissingCode);
    };
    let verifier = match open_verifier(core, row) {
        Ok(verifier) => verifier,
        Err(error) => {
            tracing::error!(authorization_id = %row.id, error = %Chain(&error), "the stored PKCE verifier could not be opened");
            fail(core, row, "verifier_unreadable").await;
            return Err(FlowError::VerifierUnreadable);
        }
    };
    // RFC 6749 §4.1.3, RFC 7636 §4.5: the code with the verifier and the exact redirect_uri.
    let redirect_uri = sent_with(core, row)?;
    let exchange = client::exchange_code(&core.http, &provider, &redirect_uri, code, &verifier);
    let tokens = match crate::telemetry::provider_call(provider.id.as_str(), "token", exchange).await {
        Ok(tokens) => tokens,
        Err(error) => {
            let reason = exchange_reason(&error);
            fail(core, row, &format!("exchange_failed:{reason}")).await;
            return Err(FlowError::ExchangeFailed(reason));
        }
    };
    let made_in = tokens::MadeIn { organization: &row.organization, app_id: row.app_id.as_deref() };
    let stored = match tokens::store_grant(core, &row.user_id, &provider, tokens, &row.scopes, made_in).await {
        Ok(stored) => stored,
        // The provider would not say whose tokens these are: reported, not stored as nobody's.
        Err(tokens::TokenError::IdentityFailed(why)) => {
            tracing::warn!(authorization_id = %row.id, provider = %row.provider, why, "identity lookup failed");
            fail(core, row, "exchange_failed:identity_lookup_failed").await;
            return Err(FlowError::ExchangeFailed("identity_lookup_failed".into()));
        }
        Err(error) => {
            fail(core, row, "store_failed").await;
            return Err(FlowError::Internal(because("the provider's tokens could not be stored", error)));
        }
    };
    let now = core.now();
    // The client that asked may use what the user just approved (other clients still ask),
    // recorded with the completion itself.
    if consent::complete_connect(core, row, &stored.grant_id).await? == ConnectCompleted::FinishedMeanwhile {
        // Declined in the client meanwhile: the grant is stored, but no client was allowed.
        tracing::warn!(authorization_id = %row.id, "authorization was finished by someone else during the exchange");
    }
    let detail = format!("id={}", row.id);
    core.store
        .audit()
        .record_implied(now, Some(&row.user_id), "authorization.completed", Some(&row.provider), Some(&detail))
        .await?;
    tracing::info!(authorization_id = %row.id, provider = %row.provider, "authorization completed");
    publish(core, row, "completed");
    Ok(Connected {
        authorization_id: row.id.clone(),
        provider_id: provider.id.to_string(),
        provider_name: provider.display_name.clone(),
    })
}

/// How long a code exchange can take at most: the provider call's own timeouts
/// ([`client::http_client`], 5 s to connect, 30 s in all) and the writes after it, with room to
/// spare. An `exchanging` row older than this was abandoned by a process that stopped.
pub const EXCHANGE_TIMEOUT_SECONDS: i64 = 120;
/// The failure recorded on a row whose exchange was interrupted.
pub const INTERRUPTED: &str = "interrupted";

/// Whether this row's exchange started longer ago than any exchange can take.
pub fn exchange_interrupted(row: &AuthorizationRow, now: i64) -> bool {
    row.status == AuthorizationStatus::Exchanging && now - row.updated_at > EXCHANGE_TIMEOUT_SECONDS
}

/// Marks every abandoned exchange failed (and tells whoever waits on it), so a row never
/// stays `exchanging` until an operator purges it. Returns how many were settled.
pub async fn settle_interrupted_exchanges(core: &Core) -> Result<usize, StoreError> {
    let rows = core.store.authorizations().stale_exchanges(core.now() - EXCHANGE_TIMEOUT_SECONDS).await?;
    for row in &rows {
        fail(core, row, INTERRUPTED).await;
    }
    Ok(rows.len())
}

/// The error a `failed` row's stored reason (what [`fail`] wrote) stands for, so a page shown
/// later can say what [`complete`] said then; `None` for a reason this module does not write.
pub fn failure_error(reason: &str) -> Option<FlowError> {
    if let Some(code) = reason.strip_prefix("provider_error:") {
        return Some(FlowError::ProviderRefused(error_code(code)));
    }
    if let Some(why) = reason.strip_prefix("exchange_failed:") {
        return Some(FlowError::ExchangeFailed(error_code(why)));
    }
    match reason {
        "missing_code" => Some(FlowError::MissingCode),
        "verifier_unreadable" => Some(FlowError::VerifierUnreadable),
        "grant_gone" => Some(FlowError::GrantGone),
        "connection_changed" => Some(FlowError::ConnectionChanged),
        INTERRUPTED => Some(FlowError::Interrupted),
        _ => None,
    }
}

fn open_verifier(core: &Core, row: &AuthorizationRow) -> Result<SecretString, FlowError> {
    // The row says where it stands (`redirected`) only with a verifier: a missing one is the
    // whole cause.
    let sealed = row.pkce_verifier_sealed.as_deref().ok_or_else(|| FlowError::Internal("no verifier stored".into()))?;
    let bytes = core.sealer.open(sealed, verifier_ctx(row)).map_err(|e| FlowError::Internal(Box::new(e)))?;
    String::from_utf8(bytes)
        .map(SecretString::from)
        .map_err(|e| FlowError::Internal(because("the verifier is not UTF-8", e)))
}

/// Marks the row failed, records it and tells listeners. Store errors are logged: the caller is
/// already reporting a failure to the browser.
async fn fail(core: &Core, row: &AuthorizationRow, reason: &str) {
    let now = core.now();
    match core.store.authorizations().finish(&row.id, AuthorizationStatus::Failed, Some(reason), now).await {
        Ok(true) => {}
        Ok(false) => tracing::warn!(authorization_id = %row.id, "authorization already finished"),
        Err(error) => tracing::error!(authorization_id = %row.id, %error, "could not mark authorization failed"),
    }
    let detail = format!("id={} reason={reason}", row.id);
    if let Err(error) = core
        .store
        .audit()
        .record_implied(now, Some(&row.user_id), "authorization.failed", Some(&row.provider), Some(&detail))
        .await
    {
        tracing::error!(authorization_id = %row.id, %error, "could not audit failed authorization");
    }
    tracing::warn!(authorization_id = %row.id, provider = %row.provider, reason, "authorization failed");
    publish(core, row, "failed");
}

pub(crate) fn publish(core: &Core, row: &AuthorizationRow, status: &str) {
    core.events.publish(AuthorizationFinished {
        authorization_id: row.id.clone(),
        user_id: row.user_id.clone(),
        provider: row.provider.clone(),
        status: status.to_owned(),
    });
}

/// An OAuth error code reduced to `[a-z_]` (at most 64), safe to store, log and show.
pub fn error_code(raw: &str) -> String {
    let code: String = raw.chars().filter(|c| c.is_ascii_lowercase() || *c == '_').take(64).collect();
    if code.is_empty() { "unknown".into() } else { code }
}

fn exchange_reason(error: &ProviderError) -> String {
    match error {
        ProviderError::InvalidGrant => "invalid_grant".into(),
        ProviderError::Refused { error } => error_code(error),
        ProviderError::Unavailable(_) => "unavailable".into(),
        ProviderError::BadResponse => "bad_response".into(),
        ProviderError::Misconfigured(_) => "misconfigured".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_are_reduced_to_lowercase_and_underscores() {
        assert_eq!(error_code("access_denied"), "access_denied");
        assert_eq!(error_code("<script>alert(1)</script>"), "scriptalertscript");
        assert_eq!(error_code("ACCESS DENIED"), "unknown");
        assert_eq!(error_code(&"a".repeat(100)).len(), 64);
    }

    #[test]
    fn callback_params_debug_hides_code_and_state() {
        let params =
            CallbackParams { code: Some("the-code".into()), state: Some("the-state".into()), ..Default::default() };
        let shown = format!("{params:?}");
        assert!(!shown.contains("the-code") && !shown.contains("the-state"));
    }
}
