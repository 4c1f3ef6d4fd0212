//! Moving every sealed value to the active encryption key (`admin keys rewrap`), online.
//!
//! Each value is opened with the key that sealed it and sealed again with the active key in
//! memory; only sealed bytes are written, by compare-and-swap ([`crate::store::sealing`]), so a
//! server serving meanwhile keeps working: it still opens the old value if it read it before,
//! and a value it changed meanwhile (a refresh, a new consent) is simply left — it was sealed
//! by then with whichever key that server seals with, and a later pass takes it. Work goes in
//! batches by id, so a run that is interrupted loses nothing and the next run goes on where the
//! values still need it (idempotent: a value already under the active key is never touched).
//! A value that cannot be opened (tampered, or under a key not loaded) is reported, never
//! dropped or replaced.

use secrecy::ExposeSecret;

use super::core::Core;
use crate::crypto::Sealer;
use crate::identity::jwt::key_context;
use crate::store::StoreResult;

use super::flow::verifier_ctx_of;
use super::sealed_grant::{access_ctx, owner, refresh_ctx};

/// What one rewrap run did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RewrapReport {
    /// Values moved to the active key, per kind.
    pub grants: u64,
    pub verifiers: u64,
    pub signing_keys: u64,
    /// Secret headers of servers behind the broker.
    pub gateway_secrets: u64,
    /// Services' webhook signing secrets (current and previous).
    pub webhook_secrets: u64,
    /// Organizations' app client secrets.
    pub app_secrets: u64,
    /// Rows that changed while we worked (or are being refreshed): left for the next run.
    pub skipped: u64,
    /// Values that could not be opened: what and why (ids only, never a value).
    pub unreadable: Vec<String>,
}

impl RewrapReport {
    pub fn moved(&self) -> u64 {
        self.grants
            + self.verifiers
            + self.signing_keys
            + self.gateway_secrets
            + self.webhook_secrets
            + self.app_secrets
    }
}

/// Rewraps everything not sealed by the active key, `batch` rows per query.
pub async fn rewrap_all(core: &Core, batch: i64) -> StoreResult<RewrapReport> {
    let sealer = &core.sealer;
    let active = sealer.active_key_id();
    let mut report = RewrapReport::default();

    let mut after = String::new();
    loop {
        let rows = core.store.grants().to_rewrap(&active, &after, batch).await?;
        let Some(last) = rows.last() else { break };
        after = last.id.clone();
        for grant in rows {
            let owner = owner(&grant.user_id, &grant.provider);
            let access = reseal(sealer, &grant.access_token_sealed, access_ctx(&grant.id, &owner));
            let refresh = grant
                .refresh_token_sealed
                .as_deref()
                .map(|sealed| reseal(sealer, sealed, refresh_ctx(&grant.id, &owner)))
                .transpose();
            match (access, refresh) {
                (Ok(access), Ok(refresh)) => {
                    if core.store.grants().rewrap(&grant, &access, refresh.as_deref(), &active).await? {
                        report.grants += 1;
                    } else {
                        report.skipped += 1;
                    }
                }
                (Err(why), _) | (_, Err(why)) => report.unreadable.push(format!("grant {}: {why}", grant.id)),
            }
        }
    }

    let mut after = String::new();
    loop {
        let rows = core.store.authorizations().verifiers_to_rewrap(&active, &after, batch).await?;
        let Some(last) = rows.last() else { break };
        after = last.id.clone();
        for row in rows {
            let ctx = verifier_ctx_of(&row.id, &row.user_id);
            match reseal(sealer, &row.pkce_verifier_sealed, ctx) {
                Ok(new) => {
                    if core.store.authorizations().rewrap_verifier(&row.id, &row.pkce_verifier_sealed, &new).await? {
                        report.verifiers += 1;
                    } else {
                        report.skipped += 1;
                    }
                }
                Err(why) => report.unreadable.push(format!("authorization {}: {why}", row.id)),
            }
        }
    }

    for row in core.store.signing_keys().to_rewrap(&active).await? {
        match reseal(sealer, &row.private_key_sealed, key_context(&row.kid)) {
            Ok(new) => {
                if core.store.signing_keys().rewrap(&row.kid, &row.private_key_sealed, &new).await? {
                    report.signing_keys += 1;
                } else {
                    report.skipped += 1;
                }
            }
            Err(why) => report.unreadable.push(format!("signing key {}: {why}", row.kid)),
        }
    }

    for (id, sealed) in core.store.gateway_servers().secrets_to_rewrap(&active).await? {
        let ctx = crate::store::gateway::secret_seal_context(&id);
        match reseal(sealer, &sealed, ctx) {
            Ok(new) => {
                if core.store.gateway_servers().rewrap_secret(&id, &sealed, &new).await? {
                    report.gateway_secrets += 1;
                } else {
                    report.skipped += 1;
                }
            }
            Err(why) => report.unreadable.push(format!("gateway server {id}: {why}")),
        }
    }
    for row in core.store.webhooks().secrets_to_rewrap(&active).await? {
        let ctx = crate::events::webhooks::signing::seal_context(&row.service_id);
        let moved = |sealed: &Option<Vec<u8>>| sealed.as_deref().map(|sealed| reseal(sealer, sealed, ctx)).transpose();
        match (moved(&row.current), moved(&row.previous)) {
            (Ok(current), Ok(previous)) => {
                if core.store.webhooks().rewrap_secrets(&row, current.as_deref(), previous.as_deref()).await? {
                    report.webhook_secrets += u64::from(current.is_some()) + u64::from(previous.is_some());
                } else {
                    report.skipped += 1;
                }
            }
            (Err(why), _) | (_, Err(why)) => {
                report.unreadable.push(format!("webhook of service {}: {why}", row.service_id))
            }
        }
    }
    for row in core.store.sealed().app_secrets_to_rewrap(&active).await? {
        let ctx = super::provider_apps::secret_context(&row.id, &row.organization_id);
        match reseal(sealer, &row.sealed, ctx) {
            Ok(new) => {
                if core.store.sealed().rewrap_app_secret(&row.id, &row.sealed, &new).await? {
                    report.app_secrets += 1;
                } else {
                    report.skipped += 1;
                }
            }
            Err(why) => report.unreadable.push(format!("provider app {}: {why}", row.id)),
        }
    }
    Ok(report)
}

/// Opens and seals again with the active key, in memory only.
fn reseal(sealer: &Sealer, sealed: &[u8], ctx: crate::crypto::SealContext<'_>) -> Result<Vec<u8>, String> {
    let plaintext = secrecy::SecretBox::new(Box::new(sealer.open(sealed, ctx).map_err(|e| e.to_string())?));
    Ok(sealer.seal(plaintext.expose_secret(), ctx))
}
