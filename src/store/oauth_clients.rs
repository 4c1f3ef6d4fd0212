//! MCP clients registered with the built-in authorization server (RFC 7591), see
//! [`crate::authorization_server`]. A confidential client's secret is stored only as its SHA-256:
//! the secret is 256 random bits, so a fast hash is enough and a database reader cannot use it.

use super::{Store, StoreError, StoreResult};
use crate::clock::Timestamp;

#[derive(Clone, sqlx::FromRow)]
pub struct OAuthClientRow {
    pub client_id: String,
    /// `sha256_hex` of the secret; `None` for public clients.
    pub client_secret_hash: Option<String>,
    pub token_endpoint_auth_method: String,
    pub client_name: Option<String>,
    /// JSON array of exact strings; read it with [`OAuthClientRow::redirect_uri_list`].
    pub redirect_uris: String,
    /// Space separated.
    pub grant_types: String,
    /// Space separated; `None` when the client registered no scope.
    pub scope: Option<String>,
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

impl OAuthClientRow {
    /// The registered redirect URIs.
    pub fn redirect_uri_list(&self) -> StoreResult<Vec<String>> {
        serde_json::from_str(&self.redirect_uris)
            .map_err(|_| StoreError::Corrupt(format!("oauth client {} has malformed redirect_uris", self.client_id)))
    }

    /// Encodes redirect URIs for [`OAuthClientRow::redirect_uris`].
    pub fn encode_redirect_uris(uris: &[String]) -> String {
        serde_json::Value::from(uris.to_vec()).to_string()
    }
}

const CLIENT_COLUMNS: &str = "client_id, client_secret_hash, token_endpoint_auth_method, client_name, redirect_uris, grant_types, scope, created_at";

impl Store {
    /// Stores a new client; [`StoreError::Conflict`] if the id is taken.
    pub async fn insert_oauth_client(&self, row: &OAuthClientRow) -> StoreResult<()> {
        sqlx::query(&format!("INSERT INTO oauth_clients ({CLIENT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"))
            .bind(&row.client_id)
            .bind(&row.client_secret_hash)
            .bind(&row.token_endpoint_auth_method)
            .bind(&row.client_name)
            .bind(&row.redirect_uris)
            .bind(&row.grant_types)
            .bind(&row.scope)
            .bind(row.created_at)
            .execute(self.pool())
            .await
            .map_err(StoreError::from_write)?;
        Ok(())
    }

    pub async fn oauth_client(&self, client_id: &str) -> StoreResult<Option<OAuthClientRow>> {
        Ok(sqlx::query_as::<_, OAuthClientRow>(&format!(
            "SELECT {CLIENT_COLUMNS} FROM oauth_clients WHERE client_id = $1"
        ))
        .bind(client_id)
        .fetch_optional(self.pool())
        .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_client_round_trips_and_its_id_is_unique() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::connect(&format!("sqlite://{}/t.db?mode=rwc", dir.path().display())).await.unwrap();
        store.migrate().await.unwrap();
        let uris = vec!["http://127.0.0.1:9/cb".to_owned(), "https://app.example/cb?x=\"y\"".to_owned()];
        let row = OAuthClientRow {
            client_id: "c1".into(),
            client_secret_hash: None,
            token_endpoint_auth_method: "none".into(),
            client_name: Some("Tool".into()),
            redirect_uris: OAuthClientRow::encode_redirect_uris(&uris),
            grant_types: "authorization_code refresh_token".into(),
            scope: None,
            created_at: 10,
        };
        store.insert_oauth_client(&row).await.unwrap();
        let back = store.oauth_client("c1").await.unwrap().unwrap();
        assert_eq!(back.redirect_uri_list().unwrap(), uris);
        assert!(matches!(store.insert_oauth_client(&row).await, Err(StoreError::Conflict)));
        assert!(store.oauth_client("c2").await.unwrap().is_none());
    }
}
