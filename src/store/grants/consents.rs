//! Client consents: a user's permission for one MCP client to use one of their connections
//! (MCP security best practices §Confused deputy). A consent names the grant, the client (see
//! [`crate::domain::ClientIdentity::key`]) and the scopes the user allowed; it covers the grant
//! only while the grant carries no scope beyond those ([`ConsentRow::covers`]). Rows go with
//! their grant (`ON DELETE CASCADE`).

use crate::clock::Timestamp;
use crate::domain::Scopes;

use crate::store::grants::list::BY_GRANT_TEXT;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::counts::Count;
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::paging::{Cursor, ListSql, Paged, Search, Window};
use crate::store::machinery::search::{Indexed, TextIndex};
use crate::store::machinery::store::Store;
use crate::store::machinery::transaction::Transaction;
use crate::store::machinery::write::{On, Write, Written};
use crate::store::users::list::BY_USER_NAME;

/// The handle on client consents: `store.consents()`.
#[derive(Debug, Clone, Copy)]
pub struct Consents<'s> {
    pub(in crate::store) store: &'s Store,
}

/// A consent as the rest of the broker sees it: scopes parsed once, here.
#[derive(Debug, Clone)]
pub struct ConsentRow {
    pub grant_id: String,
    pub client_key: String,
    pub user_id: String,
    pub client_name: Option<String>,
    /// The scopes the user allowed; space separated in the column.
    pub scopes: Scopes,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl ConsentRow {
    /// Whether this consent lets its client use a grant that carries `granted`: every scope
    /// the token carries must have been allowed, since the client could exercise any of them.
    pub fn covers(&self, granted: &Scopes) -> bool {
        self.scopes.is_superset_of(granted)
    }
}

/// The row as stored; read only through [`ConsentRow::try_from`].
#[derive(sqlx::FromRow)]
struct RawConsentRow {
    grant_id: String,
    client_key: String,
    user_id: String,
    client_name: Option<String>,
    scopes: String,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl TryFrom<RawConsentRow> for ConsentRow {
    type Error = StoreError;

    fn try_from(raw: RawConsentRow) -> Result<Self, Self::Error> {
        let scopes = Scopes::from_space_separated(&raw.scopes).map_err(|e| {
            StoreError::Corrupt(format!("consent of grant {:?} for {:?}: {e}", raw.grant_id, raw.client_key))
        })?;
        Ok(ConsentRow {
            grant_id: raw.grant_id,
            client_key: raw.client_key,
            user_id: raw.user_id,
            client_name: raw.client_name,
            scopes,
            created_at: raw.created_at,
            updated_at: raw.updated_at,
        })
    }
}

/// The consent to record when a consent-only authorization is approved.
#[derive(Debug, Clone)]
pub struct NewConsent<'a> {
    pub authorization_id: &'a str,
    pub grant_id: &'a str,
    pub user_id: &'a str,
    pub client_key: &'a str,
    pub client_name: Option<&'a str>,
    pub scopes: &'a Scopes,
}

/// [`Consents::record`]: false when the grant is gone or not the user's.
///
/// INSERT … SELECT from grants, so a consent is never written for a grant that is gone or
/// belongs to someone else, whatever the caller passed; the statement affects no row then.
/// (The WHERE clause also keeps SQLite from reading `ON CONFLICT` as part of the SELECT: do not
/// drop it.)
pub struct RecordConsent<'a> {
    grant_id: &'a str,
    user_id: &'a str,
    client_key: &'a str,
    client_name: Option<&'a str>,
    scopes: &'a Scopes,
    now: Timestamp,
}

impl Write for RecordConsent<'_> {
    type Done = bool;

    async fn run(&self, on: On<'_, '_>) -> StoreResult<bool> {
        let upsert = sqlx::query(
            "INSERT INTO client_consents (grant_id, client_key, user_id, client_name, scopes, created_at, updated_at) \
             SELECT id, $1, user_id, $2, $3, $4, $4 FROM grants WHERE id = $5 AND user_id = $6 \
             ON CONFLICT (grant_id, client_key) DO UPDATE SET client_name = excluded.client_name, \
             scopes = excluded.scopes, updated_at = excluded.updated_at",
        )
        .bind(self.client_key)
        .bind(self.client_name)
        .bind(self.scopes.to_space_separated())
        .bind(self.now)
        .bind(self.grant_id)
        .bind(self.user_id);
        Ok(on.execute(CacheEffect::User(self.user_id), upsert).await?.rows_affected() == 1)
    }

    fn applied(done: &bool) -> bool {
        *done
    }
}

const CONSENT_COLUMNS: &str = "grant_id, client_key, user_id, client_name, scopes, created_at, updated_at";

impl<'s> Consents<'s> {
    /// Every consent, for the dashboard (bounded: [`crate::store::machinery::counts`]).
    pub(in crate::store) async fn count(self) -> StoreResult<Count> {
        self.store.capped_count("client_consents", None, 0).await
    }

    /// Records (or replaces) the consent for `client_key` to use `grant_id` with `scopes`.
    /// False when the grant no longer exists (it was disconnected meanwhile).
    pub fn record(
        self,
        grant_id: &'s str,
        user_id: &'s str,
        client_key: &'s str,
        client_name: Option<&'s str>,
        scopes: &'s Scopes,
        now: Timestamp,
    ) -> Written<'s, RecordConsent<'s>> {
        Written::new(self.store, RecordConsent { grant_id, user_id, client_key, client_name, scopes, now })
    }

    pub async fn find(self, grant_id: &str, client_key: &str) -> StoreResult<Option<ConsentRow>> {
        sqlx::query_as::<_, RawConsentRow>(&format!(
            "SELECT {CONSENT_COLUMNS} FROM client_consents WHERE grant_id = $1 AND client_key = $2"
        ))
        .bind(grant_id)
        .bind(client_key)
        .fetch_optional_in(self.store.read())
        .await?
        .map(ConsentRow::try_from)
        .transpose()
    }

    /// The user's consents, by grant then client.
    pub async fn for_user(self, user_id: &str) -> StoreResult<Vec<ConsentRow>> {
        sqlx::query_as::<_, RawConsentRow>(&format!(
            "SELECT {CONSENT_COLUMNS} FROM client_consents WHERE user_id = $1 ORDER BY grant_id, client_key"
        ))
        .bind(user_id)
        .fetch_all_in(self.store.read())
        .await?
        .into_iter()
        .map(ConsentRow::try_from)
        .collect()
    }

    /// The newest consents given to one client (`service:<id>`, …): the
    /// `client_consents_client` index (migration 0028) serves it at any size.
    pub async fn for_client(self, client_key: &str, limit: i64) -> StoreResult<Vec<ConsentRow>> {
        sqlx::query_as::<_, RawConsentRow>(&format!(
            "SELECT {CONSENT_COLUMNS} FROM client_consents WHERE client_key = $1 ORDER BY updated_at DESC LIMIT $2"
        ))
        .bind(client_key)
        .bind(limit)
        .fetch_all_in(self.store.read())
        .await?
        .into_iter()
        .map(ConsentRow::try_from)
        .collect()
    }

    /// Every consent (admin listing), newest first.
    pub async fn all(self, limit: i64) -> StoreResult<Vec<ConsentRow>> {
        sqlx::query_as::<_, RawConsentRow>(&format!(
            "SELECT {CONSENT_COLUMNS} FROM client_consents ORDER BY updated_at DESC LIMIT $1"
        ))
        .bind(limit)
        .fetch_all_in(self.store.read())
        .await?
        .into_iter()
        .map(ConsentRow::try_from)
        .collect()
    }

    /// Withdraws one consent of this user; false if there was none.
    pub async fn revoke(self, user_id: &str, grant_id: &str, client_key: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM client_consents WHERE user_id = $1 AND grant_id = $2 AND client_key = $3")
            .bind(user_id)
            .bind(grant_id)
            .bind(client_key)
            .execute(self.store.write(CacheEffect::User(user_id)))
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Withdraws every consent of this user for one client; returns how many there were.
    pub async fn revoke_client(self, user_id: &str, client_key: &str) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM client_consents WHERE user_id = $1 AND client_key = $2")
            .bind(user_id)
            .bind(client_key)
            .execute(self.store.write(CacheEffect::User(user_id)))
            .await?;
        Ok(done.rows_affected())
    }
}

/// What the admin consents list searches: the client, scopes, the connection (its provider,
/// account, status, scopes) and the user's name (see `search`).
const CONSENT_TEXT: TextIndex = TextIndex {
    table: "client_consents",
    text: "LOWER(client_key || ' ' || COALESCE(client_name, '') || ' ' || scopes || ' ' || grant_id)",
    fts: "client_consents_search",
    column: "text",
    partial: None,
};

impl Consents<'_> {
    /// One page of consents matching `search`, most recently changed first.
    pub async fn page(self, search: &Search, window: Window) -> StoreResult<Paged<ConsentRow>> {
        let sql = ListSql {
            columns: CONSENT_COLUMNS,
            from: "client_consents",
            filter: "",
            indexed: Some(Indexed { own: CONSENT_TEXT, via: &[BY_GRANT_TEXT, BY_USER_NAME], extra: Vec::new() }),
            chosen: None,
            order: "updated_at DESC, grant_id DESC, client_key DESC",
            after: "(updated_at, grant_id, client_key) < ({k}, {i}, {j})",
        };
        let key = |c: &RawConsentRow| Cursor { key: c.updated_at, id: c.grant_id.clone(), id2: c.client_key.clone() };
        self.store.paged(sql, search, None, window, key).await?.try_map(ConsentRow::try_from)
    }
}

impl Consents<'_> {
    /// Deletes every consent given to the client `client_key`, within `tx` (the client is being
    /// removed); how many there were.
    pub(in crate::store) async fn delete_for_client(
        self,
        tx: &mut Transaction<'_>,
        client_key: &str,
    ) -> StoreResult<u64> {
        let delete = sqlx::query("DELETE FROM client_consents WHERE client_key = $1").bind(client_key);
        // Any number of users' consents.
        Ok(On::Within(tx).execute(CacheEffect::Everyone, delete).await?.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::grants::{Grants, NewGrant, SealedTokens};

    fn raw(scopes: &str) -> RawConsentRow {
        RawConsentRow {
            grant_id: "g1".into(),
            client_key: "token:t".into(),
            user_id: "u1".into(),
            client_name: None,
            scopes: scopes.into(),
            created_at: 1,
            updated_at: 1,
        }
    }

    #[test]
    fn a_stored_row_becomes_a_typed_consent_and_a_malformed_scope_is_corrupt() {
        let consent = ConsentRow::try_from(raw("profile notes:read")).unwrap();
        assert!(consent.covers(&Scopes::parse(["profile"]).unwrap()));
        assert!(!consent.covers(&Scopes::parse(["profile", "notes:write"]).unwrap()));
        assert!(matches!(ConsentRow::try_from(raw("profile \"x\"")), Err(StoreError::Corrupt(_))));
    }

    #[tokio::test]
    async fn a_consent_round_trips_through_sqlite_as_typed_scopes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite://{}/t.db?mode=rwc", dir.path().display())).await.unwrap();
        store.migrate().await.unwrap();
        let user = store.users().create_local("http://issuer", "alice", "hash", 1).await.unwrap().id;
        let scopes = Scopes::parse(["profile", "notes:read"]).unwrap();
        let tokens = SealedTokens {
            access_token_sealed: vec![1],
            refresh_token_sealed: None,
            key_id: "k1".into(),
            expires_at: None,
            scopes: scopes.clone(),
        };
        let grant_id = Grants::id_for(&user, "demo", "");
        assert!(
            store
                .grants()
                .upsert(
                    &NewGrant {
                        id: &grant_id,
                        user_id: &user,
                        provider: "demo",
                        account_label: None,
                        tokens: &tokens,
                        organization: &crate::domain::OrganizationId::default_organization(),
                        app_id: None
                    },
                    10
                )
                .await
                .unwrap()
        );

        assert!(store.consents().record(&grant_id, &user, "token:t", None, &scopes, 11).await.unwrap());
        let consent = store.consents().find(&grant_id, "token:t").await.unwrap().unwrap();
        assert_eq!(consent.scopes, scopes);
        let (stored,): (String,) =
            sqlx::query_as("SELECT scopes FROM client_consents").fetch_one(store.pool()).await.unwrap();
        assert_eq!(stored, "notes:read profile");

        sqlx::query("UPDATE client_consents SET scopes = 'a\\b'").execute(store.pool()).await.unwrap();
        assert!(matches!(store.consents().for_user(&user).await, Err(StoreError::Corrupt(_))));
    }
}
