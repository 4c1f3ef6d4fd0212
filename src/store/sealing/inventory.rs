//! Every sealed value in the database, by the key that sealed it: what `admin keys status`
//! counts, what start-up checks against the loaded keys, and what `admin keys rewrap` moves.
//!
//! A sealed blob starts `v1 ‖ key_id(8)` ([`crate::crypto`]), so the key is read from the value
//! itself, not from a column that could disagree with it (`grants.key_id` is informational).
//! Rewrapping writes are compare-and-swap on the old blob (or, for grants, on the row version
//! and on nobody holding the refresh lease), so a value a server changed meanwhile is left for
//! the next pass and a refresh in flight never loses its rotated token
//! (`src/broker/refresh.rs` stores only if the refresh token it redeemed is still there).

use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::store::Store;
use crate::store::sealing::key_ids::key_id_sql;

/// The handle on the inventory of sealed values: `store.sealed()`.
#[derive(Debug, Clone, Copy)]
pub struct Sealed<'s> {
    pub(in crate::store) store: &'s Store,
}

/// Where sealed values live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealedColumn {
    GrantAccessToken,
    GrantRefreshToken,
    AuthorizationPkceVerifier,
    SigningKey,
    /// A gateway server's secret header (`admin servers add --auth secret-header`).
    GatewaySecret,
    /// A service's webhook signing secret (`admin services set-webhook`).
    WebhookSecret,
    /// The secret a rotation replaced, still signing until its overlap ends.
    WebhookPreviousSecret,
    /// An organization's own OAuth app's client secret (`admin orgs set-app`).
    ProviderAppSecret,
}

impl SealedColumn {
    pub const ALL: [SealedColumn; 8] = [
        SealedColumn::GrantAccessToken,
        SealedColumn::GrantRefreshToken,
        SealedColumn::AuthorizationPkceVerifier,
        SealedColumn::SigningKey,
        SealedColumn::GatewaySecret,
        SealedColumn::WebhookSecret,
        SealedColumn::WebhookPreviousSecret,
        SealedColumn::ProviderAppSecret,
    ];

    fn table_column(self) -> (&'static str, &'static str) {
        match self {
            SealedColumn::GrantAccessToken => ("grants", "access_token_sealed"),
            SealedColumn::GrantRefreshToken => ("grants", "refresh_token_sealed"),
            SealedColumn::AuthorizationPkceVerifier => ("authorizations", "pkce_verifier_sealed"),
            SealedColumn::SigningKey => ("signing_keys", "private_key_sealed"),
            SealedColumn::GatewaySecret => ("gateway_servers", "secret_sealed"),
            SealedColumn::WebhookSecret => ("services", "webhook_secret_sealed"),
            SealedColumn::WebhookPreviousSecret => ("services", "webhook_previous_secret_sealed"),
            SealedColumn::ProviderAppSecret => ("provider_apps", "client_secret_sealed"),
        }
    }

    /// For operators: what the values are.
    pub fn label(self) -> &'static str {
        match self {
            SealedColumn::GrantAccessToken => "grant access tokens",
            SealedColumn::GrantRefreshToken => "grant refresh tokens",
            SealedColumn::AuthorizationPkceVerifier => "PKCE verifiers of open authorizations",
            SealedColumn::SigningKey => "JWT signing keys",
            SealedColumn::GatewaySecret => "secret headers of servers behind the broker",
            SealedColumn::WebhookSecret => "webhook signing secrets of services",
            SealedColumn::WebhookPreviousSecret => "webhook signing secrets replaced by a rotation, still in overlap",
            SealedColumn::ProviderAppSecret => "client secrets of organizations' own OAuth apps",
        }
    }
}

/// How many values of one column one key seals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedCount {
    pub column: SealedColumn,
    /// Hex, as [`crate::crypto::Sealer::key_id_of`].
    pub key_id: String,
    pub count: i64,
}

impl Sealed<'_> {
    /// How many values each key seals, per column (columns with none are left out): the keys
    /// found by [`Sealed::key_ids`], then a count of each one's range of the column's
    /// key-id index. Never reads the values: a `GROUP BY` over the column read every row's blob
    /// (1.3 s for `keys status` at a million grants).
    pub async fn counts(self) -> StoreResult<Vec<SealedCount>> {
        let mut counts = Vec::new();
        for (column, key_id) in self.key_ids().await? {
            let count = self.count(column, &key_id).await?;
            counts.push(SealedCount { column, key_id, count });
        }
        Ok(counts)
    }

    /// Which keys seal values, per column, without reading the values: a walk up each column's
    /// key-id index (migration 0020), one lookup per distinct key. It starts above `''`: SQLite's
    /// `hex(NULL)` is `''`, so an empty column's key id is `''`, not NULL. What start-up and every
    /// admin command check; [`Sealed::counts`] (a full count) is for `keys status`.
    pub async fn key_ids(self) -> StoreResult<Vec<(SealedColumn, String)>> {
        let mut found = Vec::new();
        for column in SealedColumn::ALL {
            let (table, name) = column.table_column();
            let key_id = key_id_sql(self.store.backend(), name);
            let rows: Vec<(String,)> = sqlx::query_as(&format!(
                "WITH RECURSIVE k(v) AS ( \
                   SELECT (SELECT {key_id} FROM {table} WHERE {key_id} > '' ORDER BY {key_id} LIMIT 1) \
                   UNION ALL \
                   SELECT (SELECT {key_id} FROM {table} WHERE {key_id} > k.v ORDER BY {key_id} LIMIT 1) FROM k WHERE k.v IS NOT NULL \
                 ) SELECT v FROM k WHERE v IS NOT NULL"
            ))
            .fetch_all_in(self.store.read())
            .await?;
            found.extend(rows.into_iter().map(|(key_id,)| (column, key_id)));
        }
        Ok(found)
    }

    /// How many values of `column` key `key_id` seals (an index range count).
    pub async fn count(self, column: SealedColumn, key_id: &str) -> StoreResult<i64> {
        let (table, name) = column.table_column();
        let expr = key_id_sql(self.store.backend(), name);
        let (n,): (i64,) = sqlx::query_as(&format!("SELECT COUNT(*) FROM {table} WHERE {expr} = $1"))
            .bind(key_id.to_owned())
            .fetch_one_in(self.store.read())
            .await?;
        Ok(n)
    }

    /// `admin keys forget`: gives up every value sealed with `key_id`, a key lost for good, in
    /// one transaction. Grants holding one need a new consent (their token values are emptied,
    /// which no key opens, so nothing tries); open authorizations holding a verifier end as
    /// interrupted; signing keys sealed with it are deleted (a new one is made at the next
    /// start when none is left). What was given up, by kind.
    pub async fn forget(self, key_id: &str, failure: &str, now: i64) -> StoreResult<ForgottenValues> {
        let store = self.store;
        let mut tx = store.begin(CacheEffect::Everyone).await?;
        let grants = store.grants().forget_sealed_by(&mut tx, key_id, now).await?;
        let authorizations = store.authorizations().forget_sealed_by(&mut tx, key_id, failure, now).await?;
        let signing_keys = store.signing_keys().forget_sealed_by(&mut tx, key_id).await?;
        let gateway_servers = store.gateway_servers().forget_sealed_by(&mut tx, key_id).await?;
        let webhooks = store.webhooks().forget_sealed_by(&mut tx, key_id, now).await?;
        let provider_apps = self.forget_app_secrets(&mut tx, key_id, now).await?;
        tx.commit().await?;
        Ok(ForgottenValues { grants, authorizations, signing_keys, gateway_servers, webhooks, provider_apps })
    }
}

/// What `admin keys forget` gave up ([`Sealed::forget`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForgottenValues {
    /// Grants now needing a new consent.
    pub grants: u64,
    /// Open authorizations ended.
    pub authorizations: u64,
    /// JWT signing keys deleted.
    pub signing_keys: u64,
    /// Servers behind the broker removed (their secret header was sealed with it).
    pub gateway_servers: u64,
    /// Services' webhooks removed (their signing secret was sealed with it).
    pub webhooks: u64,
    /// Organizations' app versions removed (their client secret was sealed with it); the grants
    /// they issued need a new consent.
    pub provider_apps: u64,
}
