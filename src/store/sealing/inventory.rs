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
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::store::{Backend, Store};

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
}

impl SealedColumn {
    pub const ALL: [SealedColumn; 7] = [
        SealedColumn::GrantAccessToken,
        SealedColumn::GrantRefreshToken,
        SealedColumn::AuthorizationPkceVerifier,
        SealedColumn::SigningKey,
        SealedColumn::GatewaySecret,
        SealedColumn::WebhookSecret,
        SealedColumn::WebhookPreviousSecret,
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

/// A grant's sealed values, for rewrapping.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SealedGrant {
    pub id: String,
    pub user_id: String,
    pub provider: String,
    pub access_token_sealed: Vec<u8>,
    pub refresh_token_sealed: Option<Vec<u8>>,
    pub version: i64,
}

/// An open authorization's sealed PKCE verifier, for rewrapping.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SealedVerifier {
    pub id: String,
    pub user_id: String,
    pub pkce_verifier_sealed: Vec<u8>,
}

/// A signing key's sealed private half, for rewrapping.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SealedSigningKey {
    pub kid: String,
    pub private_key_sealed: Vec<u8>,
}

impl Store {
    /// The key id of a sealed column, as SQL: bytes 2..9 of the blob, lowercase hex. The two
    /// databases spell substring and hex differently.
    fn key_id_sql(&self, column: &str) -> String {
        match self.backend() {
            Backend::Sqlite => format!("lower(hex(substr({column}, 2, 8)))"),
            Backend::Postgres => format!("encode(substring({column} from 2 for 8), 'hex')"),
        }
    }

    /// How many values each key seals, per column (columns with none are left out): the keys
    /// found by [`Store::sealed_key_ids`], then a count of each one's range of the column's
    /// key-id index. Never reads the values: a `GROUP BY` over the column read every row's blob
    /// (1.3 s for `keys status` at a million grants).
    pub async fn sealed_counts(&self) -> StoreResult<Vec<SealedCount>> {
        let mut counts = Vec::new();
        for (column, key_id) in self.sealed_key_ids().await? {
            let count = self.sealed_count(column, &key_id).await?;
            counts.push(SealedCount { column, key_id, count });
        }
        Ok(counts)
    }

    /// Which keys seal values, per column, without reading the values: a walk up each column's
    /// key-id index (migration 0020), one lookup per distinct key. It starts above `''`: SQLite's
    /// `hex(NULL)` is `''`, so an empty column's key id is `''`, not NULL. What start-up and every
    /// admin command check; [`Store::sealed_counts`] (a full count) is for `keys status`.
    pub async fn sealed_key_ids(&self) -> StoreResult<Vec<(SealedColumn, String)>> {
        let mut found = Vec::new();
        for column in SealedColumn::ALL {
            let (table, name) = column.table_column();
            let key_id = self.key_id_sql(name);
            let rows: Vec<(String,)> = sqlx::query_as(&format!(
                "WITH RECURSIVE k(v) AS ( \
                   SELECT (SELECT {key_id} FROM {table} WHERE {key_id} > '' ORDER BY {key_id} LIMIT 1) \
                   UNION ALL \
                   SELECT (SELECT {key_id} FROM {table} WHERE {key_id} > k.v ORDER BY {key_id} LIMIT 1) FROM k WHERE k.v IS NOT NULL \
                 ) SELECT v FROM k WHERE v IS NOT NULL"
            ))
            .fetch_all_in(self.read())
            .await?;
            found.extend(rows.into_iter().map(|(key_id,)| (column, key_id)));
        }
        Ok(found)
    }

    /// How many values of `column` key `key_id` seals (an index range count).
    pub async fn sealed_count(&self, column: SealedColumn, key_id: &str) -> StoreResult<i64> {
        let (table, name) = column.table_column();
        let expr = self.key_id_sql(name);
        let (n,): (i64,) = sqlx::query_as(&format!("SELECT COUNT(*) FROM {table} WHERE {expr} = $1"))
            .bind(key_id.to_owned())
            .fetch_one_in(self.read())
            .await?;
        Ok(n)
    }

    /// Up to `limit` grants after `after` (by id) with a value not sealed by `active`, leaving
    /// out grants being refreshed (their refresh stores by compare-and-swap on the old value).
    pub async fn grants_to_rewrap(&self, active: &str, after: &str, limit: i64) -> StoreResult<Vec<SealedGrant>> {
        let access = self.key_id_sql("access_token_sealed");
        let refresh = self.key_id_sql("refresh_token_sealed");
        Ok(sqlx::query_as::<_, SealedGrant>(&format!(
            "SELECT id, user_id, provider, access_token_sealed, refresh_token_sealed, version FROM grants \
             WHERE id > $1 AND ({access} <> $2 OR (refresh_token_sealed IS NOT NULL AND {refresh} <> $2)) \
             AND refresh_lease_holder IS NULL ORDER BY id LIMIT $3"
        ))
        .bind(after)
        .bind(active)
        .bind(limit)
        .fetch_all_in(self.read())
        .await?)
    }

    /// Replaces a grant's sealed values if the row is still at `version` and nobody took its
    /// refresh lease meanwhile. The version moves on, so a refresh that read the row before
    /// claims nothing and reads it again. False when the row changed (left for the next pass).
    pub async fn rewrap_grant(
        &self,
        grant: &SealedGrant,
        access: &[u8],
        refresh: Option<&[u8]>,
        key_id: &str,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE grants SET access_token_sealed = $1, refresh_token_sealed = $2, key_id = $3, version = version + 1 \
             WHERE id = $4 AND version = $5 AND refresh_lease_holder IS NULL",
        )
        .bind(access)
        .bind(refresh)
        .bind(key_id)
        .bind(&grant.id)
        .bind(grant.version)
        .execute(self.write(CacheEffect::User(&grant.user_id)))
        .await
        .map_err(StoreError::from_write)?;
        Ok(done.rows_affected() == 1)
    }

    /// Up to `limit` authorizations after `after` whose PKCE verifier is not sealed by `active`.
    pub async fn verifiers_to_rewrap(&self, active: &str, after: &str, limit: i64) -> StoreResult<Vec<SealedVerifier>> {
        let key_id = self.key_id_sql("pkce_verifier_sealed");
        Ok(sqlx::query_as::<_, SealedVerifier>(&format!(
            "SELECT id, user_id, pkce_verifier_sealed FROM authorizations \
             WHERE id > $1 AND pkce_verifier_sealed IS NOT NULL AND {key_id} <> $2 ORDER BY id LIMIT $3"
        ))
        .bind(after)
        .bind(active)
        .bind(limit)
        .fetch_all_in(self.read())
        .await?)
    }

    /// Replaces a verifier if it is still `old`.
    pub async fn rewrap_verifier(&self, id: &str, old: &[u8], new: &[u8]) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE authorizations SET pkce_verifier_sealed = $1 WHERE id = $2 AND pkce_verifier_sealed = $3",
        )
        .bind(new)
        .bind(id)
        .bind(old)
        .execute(self.write(CacheEffect::Nothing))
        .await
        .map_err(StoreError::from_write)?;
        Ok(done.rows_affected() == 1)
    }

    /// Signing keys whose private half is not sealed by `active` (there are few: no paging).
    pub async fn signing_keys_to_rewrap(&self, active: &str) -> StoreResult<Vec<SealedSigningKey>> {
        let key_id = self.key_id_sql("private_key_sealed");
        Ok(sqlx::query_as::<_, SealedSigningKey>(&format!(
            "SELECT kid, private_key_sealed FROM signing_keys WHERE {key_id} <> $1 ORDER BY kid"
        ))
        .bind(active)
        .fetch_all_in(self.read())
        .await?)
    }

    /// Replaces a signing key's sealed private half if it is still `old`.
    pub async fn rewrap_signing_key(&self, kid: &str, old: &[u8], new: &[u8]) -> StoreResult<bool> {
        let done =
            sqlx::query("UPDATE signing_keys SET private_key_sealed = $1 WHERE kid = $2 AND private_key_sealed = $3")
                .bind(new)
                .bind(kid)
                .bind(old)
                .execute(self.write(CacheEffect::Nothing))
                .await
                .map_err(StoreError::from_write)?;
        Ok(done.rows_affected() == 1)
    }

    /// Gateway servers whose secret is not sealed by `active` (there are few: no paging).
    pub async fn gateway_secrets_to_rewrap(&self, active: &str) -> StoreResult<Vec<(String, Vec<u8>)>> {
        let key_id = self.key_id_sql("secret_sealed");
        Ok(sqlx::query_as::<_, (String, Vec<u8>)>(&format!(
            "SELECT id, secret_sealed FROM gateway_servers WHERE secret_sealed IS NOT NULL AND {key_id} <> $1 ORDER BY id"
        ))
        .bind(active)
        .fetch_all_in(self.read())
        .await?)
    }

    /// Replaces a gateway server's sealed secret if it is still `old`.
    pub async fn rewrap_gateway_secret(&self, id: &str, old: &[u8], new: &[u8]) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE gateway_servers SET secret_sealed = $1 WHERE id = $2 AND secret_sealed = $3")
            .bind(new)
            .bind(id)
            .bind(old)
            // Every instance reloads its servers (and opens the secret again) on the move.
            .execute(self.write(CacheEffect::Everyone))
            .await
            .map_err(StoreError::from_write)?;
        Ok(done.rows_affected() == 1)
    }

    /// Services whose webhook secret (current or previous) is not sealed by `active` (there
    /// are few: no paging).
    pub async fn webhook_secrets_to_rewrap(&self, active: &str) -> StoreResult<Vec<SealedWebhookSecrets>> {
        let current = self.key_id_sql("webhook_secret_sealed");
        let previous = self.key_id_sql("webhook_previous_secret_sealed");
        Ok(sqlx::query_as::<_, SealedWebhookSecrets>(&format!(
            "SELECT id AS service_id, webhook_secret_sealed AS current, webhook_previous_secret_sealed AS previous \
             FROM services WHERE (webhook_secret_sealed IS NOT NULL AND {current} <> $1) \
             OR (webhook_previous_secret_sealed IS NOT NULL AND {previous} <> $1) ORDER BY id"
        ))
        .bind(active)
        .fetch_all_in(self.read())
        .await?)
    }

    /// Replaces a service's sealed webhook secrets if both are still as read (a rotation or a
    /// new webhook meanwhile leaves the row for the next run).
    pub async fn rewrap_webhook_secrets(
        &self,
        old: &SealedWebhookSecrets,
        current: Option<&[u8]>,
        previous: Option<&[u8]>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE services SET webhook_secret_sealed = $1, webhook_previous_secret_sealed = $2 \
             WHERE id = $3 AND webhook_secret_sealed IS NOT DISTINCT FROM $4 \
             AND webhook_previous_secret_sealed IS NOT DISTINCT FROM $5",
        )
        .bind(current)
        .bind(previous)
        .bind(&old.service_id)
        .bind(old.current.as_deref())
        .bind(old.previous.as_deref())
        .execute(self.write(CacheEffect::Everyone))
        .await
        .map_err(StoreError::from_write)?;
        Ok(done.rows_affected() == 1)
    }

    /// `admin keys forget`: gives up every value sealed with `key_id`, a key lost for good, in
    /// one transaction. Grants holding one need a new consent (their token values are emptied,
    /// which no key opens, so nothing tries); open authorizations holding a verifier end as
    /// interrupted; signing keys sealed with it are deleted (a new one is made at the next
    /// start when none is left). What was given up, by kind.
    pub async fn forget_sealed_by(&self, key_id: &str, failure: &str, now: i64) -> StoreResult<ForgottenValues> {
        let access = self.key_id_sql("access_token_sealed");
        let refresh = self.key_id_sql("refresh_token_sealed");
        let verifier = self.key_id_sql("pkce_verifier_sealed");
        let private = self.key_id_sql("private_key_sealed");
        let gateway_secret = self.key_id_sql("secret_sealed");
        let webhook_secret = self.key_id_sql("webhook_secret_sealed");
        let webhook_previous = self.key_id_sql("webhook_previous_secret_sealed");
        let mut tx = self.begin(CacheEffect::Everyone).await?;
        let grants = sqlx::query(&format!(
            "UPDATE grants SET status = 'needs_reconsent', access_token_sealed = $1, refresh_token_sealed = NULL, \
             version = version + 1, updated_at = $2 \
             WHERE {access} = $3 OR (refresh_token_sealed IS NOT NULL AND {refresh} = $3)"
        ))
        .bind(Vec::<u8>::new())
        .bind(now)
        .bind(key_id)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from_write)?
        .rows_affected();
        let authorizations = sqlx::query(&format!(
            "UPDATE authorizations SET status = 'failed', failure = $1, pkce_verifier_sealed = NULL, state_hash = NULL, \
             updated_at = $2 WHERE pkce_verifier_sealed IS NOT NULL AND {verifier} = $3"
        ))
        .bind(failure)
        .bind(now)
        .bind(key_id)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from_write)?
        .rows_affected();
        let signing_keys = sqlx::query(&format!("DELETE FROM signing_keys WHERE {private} = $1"))
            .bind(key_id)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_write)?
            .rows_affected();
        // A server behind the broker whose secret is lost is removed: the operator adds it
        // again with the secret.
        let gateway_servers = sqlx::query(&format!(
            "DELETE FROM gateway_servers WHERE secret_sealed IS NOT NULL AND {gateway_secret} = $1"
        ))
        .bind(key_id)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from_write)?
        .rows_affected();
        // A replaced secret sealed with it stops signing at once; a current one takes the
        // webhook away (its events are dead-lettered): the operator sets it again, with a new
        // secret for the receiver.
        sqlx::query(&format!(
            "UPDATE services SET webhook_previous_secret_sealed = NULL, webhook_previous_until = NULL \
             WHERE webhook_previous_secret_sealed IS NOT NULL AND {webhook_previous} = $1"
        ))
        .bind(key_id)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from_write)?;
        let webhooks = sqlx::query(&format!(
            "UPDATE services SET webhook_url = NULL, webhook_secret_sealed = NULL, webhook_previous_secret_sealed = NULL, \
             webhook_previous_until = NULL, webhook_disabled_at = NULL, updated_at = $1 \
             WHERE webhook_secret_sealed IS NOT NULL AND {webhook_secret} = $2"
        ))
        .bind(now)
        .bind(key_id)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from_write)?
        .rows_affected();
        tx.commit().await?;
        Ok(ForgottenValues { grants, authorizations, signing_keys, gateway_servers, webhooks })
    }
}

/// What `admin keys forget` gave up ([`Store::forget_sealed_by`]).
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
}

/// A service's sealed webhook secrets, for rewrapping.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SealedWebhookSecrets {
    pub service_id: String,
    pub current: Option<Vec<u8>>,
    pub previous: Option<Vec<u8>>,
}
