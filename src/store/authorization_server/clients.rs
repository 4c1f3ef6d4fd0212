//! MCP clients registered with the built-in authorization server (RFC 7591), see
//! `src/authorization_server/`. A confidential client's secret is stored only as its SHA-256:
//! the secret is 256 random bits, so a fast hash is enough and a database reader cannot use it.

use crate::clock::Timestamp;
use crate::domain::{AuthMethod, Scopes};
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::counts::Count;
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::paging::{Cursor, ListSql, Paged, Search, Window};
use crate::store::machinery::placeholders::numbered_values;
use crate::store::machinery::store::Store;

/// The handle on the authorization server's registered clients: `store.oauth_clients()`.
#[derive(Debug, Clone, Copy)]
pub struct OAuthClients<'s> {
    pub(in crate::store) store: &'s Store,
}

/// The grant types a client may register; `authorization_code` always, `refresh_token` optionally.
const GRANT_TYPES_WITHOUT_REFRESH: &str = "authorization_code";
const GRANT_TYPES_WITH_REFRESH: &str = "authorization_code refresh_token";

/// A registered client as the authorization server sees it: parsed once, here.
#[derive(Clone)]
pub struct OAuthClientRow {
    pub client_id: String,
    /// `sha256_hex` of the secret; `None` for public clients.
    pub client_secret_hash: Option<String>,
    pub token_endpoint_auth_method: AuthMethod,
    pub client_name: Option<String>,
    /// Exact strings (a JSON array in the column).
    pub redirect_uris: Vec<String>,
    /// The client registered the `refresh_token` grant besides `authorization_code` (the
    /// `grant_types` column lists them, space separated).
    pub refresh_allowed: bool,
    /// `None` when the client registered no scope; space separated in the column.
    pub scope: Option<Scopes>,
    pub created_at: Timestamp,
}

impl std::fmt::Debug for OAuthClientRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthClientRow")
            .field("client_id", &self.client_id)
            .field("token_endpoint_auth_method", &self.token_endpoint_auth_method)
            .field("client_name", &self.client_name)
            .field("redirect_uris", &self.redirect_uris)
            .finish_non_exhaustive()
    }
}

/// The row as stored; read only through [`OAuthClientRow::try_from`].
#[derive(sqlx::FromRow)]
struct RawOAuthClientRow {
    client_id: String,
    client_secret_hash: Option<String>,
    token_endpoint_auth_method: String,
    client_name: Option<String>,
    redirect_uris: String,
    grant_types: String,
    scope: Option<String>,
    created_at: Timestamp,
}

impl TryFrom<RawOAuthClientRow> for OAuthClientRow {
    type Error = StoreError;

    fn try_from(raw: RawOAuthClientRow) -> Result<Self, Self::Error> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("oauth client {:?} has {what}", raw.client_id));
        let token_endpoint_auth_method =
            AuthMethod::parse(&raw.token_endpoint_auth_method).ok_or_else(|| corrupt("an unknown auth method"))?;
        let redirect_uris: Vec<String> =
            serde_json::from_str(&raw.redirect_uris).map_err(|_| corrupt("malformed redirect_uris"))?;
        let mut code = false;
        let mut refresh_allowed = false;
        for grant_type in raw.grant_types.split(' ').filter(|g| !g.is_empty()) {
            match grant_type {
                "authorization_code" => code = true,
                "refresh_token" => refresh_allowed = true,
                _ => return Err(corrupt("an unknown grant type")),
            }
        }
        if !code {
            return Err(corrupt("grant types without authorization_code"));
        }
        let scope = match &raw.scope {
            Some(scope) => Some(Scopes::from_space_separated(scope).map_err(|_| corrupt("a malformed scope"))?),
            None => None,
        };
        Ok(OAuthClientRow {
            client_id: raw.client_id,
            client_secret_hash: raw.client_secret_hash,
            token_endpoint_auth_method,
            client_name: raw.client_name,
            redirect_uris,
            refresh_allowed,
            scope,
            created_at: raw.created_at,
        })
    }
}

const CLIENT_COLUMNS: &str = "client_id, client_secret_hash, token_endpoint_auth_method, client_name, redirect_uris, grant_types, scope, created_at";

impl OAuthClients<'_> {
    /// Every registered client, for the dashboard (bounded: [`crate::store::machinery::counts`]).
    pub(in crate::store) async fn count(self) -> StoreResult<Count> {
        self.store.capped_count("oauth_clients", None, 0).await
    }

    /// Stores a new client; [`StoreError::Conflict`] if the id is taken.
    pub async fn insert(self, row: &OAuthClientRow) -> StoreResult<()> {
        sqlx::query(&format!("INSERT INTO oauth_clients ({CLIENT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"))
            .bind(&row.client_id)
            .bind(&row.client_secret_hash)
            .bind(row.token_endpoint_auth_method.as_str())
            .bind(&row.client_name)
            .bind(serde_json::Value::from(row.redirect_uris.clone()).to_string())
            .bind(if row.refresh_allowed { GRANT_TYPES_WITH_REFRESH } else { GRANT_TYPES_WITHOUT_REFRESH })
            .bind(row.scope.as_ref().map(Scopes::to_space_separated))
            .bind(row.created_at)
            .execute(self.store.write(CacheEffect::Nothing))
            .await
            .map_err(StoreError::from_write)?;
        Ok(())
    }

    pub async fn by_id(self, client_id: &str) -> StoreResult<Option<OAuthClientRow>> {
        sqlx::query_as::<_, RawOAuthClientRow>(&format!(
            "SELECT {CLIENT_COLUMNS} FROM oauth_clients WHERE client_id = $1"
        ))
        .bind(client_id)
        .fetch_optional_in(self.store.read())
        .await?
        .map(OAuthClientRow::try_from)
        .transpose()
    }

    /// The registered names of those of `ids` that are registered, in one query (a page names
    /// its rows' clients).
    pub async fn names(self, ids: &[&str]) -> StoreResult<Vec<(String, Option<String>)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT client_id, client_name FROM oauth_clients WHERE client_id IN ({})",
            numbered_values(ids.len())
        );
        let mut query = sqlx::query_as::<_, (String, Option<String>)>(&sql);
        for id in ids {
            query = query.bind(*id);
        }
        Ok(query.fetch_all_in(self.store.read()).await?)
    }

    /// Every registered client (admin listing), newest first.
    pub async fn list(self, limit: i64) -> StoreResult<Vec<OAuthClientRow>> {
        sqlx::query_as::<_, RawOAuthClientRow>(&format!(
            "SELECT {CLIENT_COLUMNS} FROM oauth_clients ORDER BY created_at DESC, client_id LIMIT $1"
        ))
        .bind(limit)
        .fetch_all_in(self.store.read())
        .await?
        .into_iter()
        .map(OAuthClientRow::try_from)
        .collect()
    }
}

/// What the admin MCP clients list searches (see `paging`).
const SEARCH_CLIENTS: &str = "LOWER(COALESCE(client_name, '') || ' ' || client_id || ' ' || token_endpoint_auth_method || ' ' || redirect_uris || ' ' || COALESCE(scope, '')) LIKE {q} ESCAPE '\\'";

impl OAuthClients<'_> {
    /// One page of registered MCP clients matching `search`, newest first.
    pub async fn page(self, search: &Search, window: Window) -> StoreResult<Paged<OAuthClientRow>> {
        let sql = ListSql {
            columns: CLIENT_COLUMNS,
            from: "oauth_clients",
            filter: SEARCH_CLIENTS,
            indexed: None,
            chosen: None,
            order: "created_at DESC, client_id DESC",
            after: "(created_at, client_id) < ({k}, {i})",
        };
        let key = |c: &RawOAuthClientRow| Cursor::new(c.created_at, c.client_id.clone());
        self.store.paged(sql, search, None, window, key).await?.try_map(OAuthClientRow::try_from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(auth_method: &str, redirect_uris: &str, grant_types: &str, scope: Option<&str>) -> RawOAuthClientRow {
        RawOAuthClientRow {
            client_id: "c1".into(),
            client_secret_hash: None,
            token_endpoint_auth_method: auth_method.into(),
            client_name: None,
            redirect_uris: redirect_uris.into(),
            grant_types: grant_types.into(),
            scope: scope.map(str::to_owned),
            created_at: 1,
        }
    }

    #[test]
    fn a_stored_row_becomes_a_typed_client() {
        let row = OAuthClientRow::try_from(raw(
            "client_secret_post",
            r#"["http://a/cb"]"#,
            "authorization_code",
            Some("mcp"),
        ))
        .unwrap();
        assert_eq!(row.token_endpoint_auth_method, AuthMethod::ClientSecretPost);
        assert_eq!((row.redirect_uris, row.refresh_allowed), (vec!["http://a/cb".to_owned()], false));
        assert_eq!(row.scope, Some(Scopes::parse(["mcp"]).unwrap()));
    }

    #[test]
    fn an_unknown_method_or_grant_type_or_malformed_list_is_corrupt() {
        let uris = r#"["http://a/cb"]"#;
        let bad = [
            raw("private_key_jwt", uris, "authorization_code", None),
            raw("none", "http://a/cb", "authorization_code", None),
            raw("none", uris, "authorization_code implicit", None),
            raw("none", uris, "refresh_token", None),
            raw("none", uris, "authorization_code", Some("mcp \"x\"")),
        ];
        for row in bad {
            assert!(matches!(OAuthClientRow::try_from(row), Err(StoreError::Corrupt(_))));
        }
    }

    #[tokio::test]
    async fn a_client_round_trips_and_its_id_is_unique() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite://{}/t.db?mode=rwc", dir.path().display())).await.unwrap();
        store.migrate().await.unwrap();
        let uris = vec!["http://127.0.0.1:9/cb".to_owned(), "https://app.example/cb?x=\"y\"".to_owned()];
        let row = OAuthClientRow {
            client_id: "c1".into(),
            client_secret_hash: None,
            token_endpoint_auth_method: AuthMethod::None,
            client_name: Some("Tool".into()),
            redirect_uris: uris.clone(),
            refresh_allowed: true,
            scope: Some(Scopes::parse(["mcp", "mcp:read"]).unwrap()),
            created_at: 10,
        };
        store.oauth_clients().insert(&row).await.unwrap();
        let back = store.oauth_clients().by_id("c1").await.unwrap().unwrap();
        assert_eq!((back.token_endpoint_auth_method, &back.redirect_uris), (AuthMethod::None, &uris));
        assert_eq!((back.refresh_allowed, &back.scope), (true, &row.scope));
        let stored: (String, String, String, Option<String>) = sqlx::query_as(
            "SELECT token_endpoint_auth_method, redirect_uris, grant_types, scope FROM oauth_clients WHERE client_id = 'c1'",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        let expected_uris = serde_json::Value::from(uris.clone()).to_string();
        assert_eq!(
            stored,
            ("none".into(), expected_uris, "authorization_code refresh_token".into(), Some("mcp mcp:read".into())),
            "the columns hold the same text as before"
        );
        assert!(matches!(store.oauth_clients().insert(&row).await, Err(StoreError::Conflict)));
        assert!(store.oauth_clients().by_id("c2").await.unwrap().is_none());
    }
}
