//! Registering, reading and removing the MCP servers behind the broker (`admin servers add`),
//! each read by every instance's gateway, which reloads its list when everyone's generation
//! moves; and their sealed secrets, rewrapped or given up with their key.

use crate::clock::Timestamp;
use crate::store::gateway::server_rows::{COLUMNS, GatewayAuth, GatewayServerRow, RawGatewayServer};
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::{StoreError, StoreResult};
use crate::store::machinery::paging::{Cursor, ListSql, Paged, Search, Window};
use crate::store::machinery::store::Store;
use crate::store::machinery::transaction::Transaction;
use crate::store::machinery::write::On;
use crate::store::sealing::key_ids::key_id_sql;

/// The handle on the servers behind the broker: `store.gateway_servers()`.
#[derive(Debug, Clone, Copy)]
pub struct GatewayServers<'s> {
    pub(in crate::store) store: &'s Store,
}

impl GatewayServers<'_> {
    /// Registers a server. [`StoreError::Conflict`] if its name or prefix is taken (the
    /// caller checks overlapping prefixes first, with the names of both servers).
    pub async fn create(self, row: &GatewayServerRow) -> StoreResult<()> {
        let mut oauth = None;
        let mut service_id = None;
        let (provider, scopes, header, scheme, secret) = match &row.auth {
            GatewayAuth::Provider { provider, scopes, header, scheme } => (
                Some(provider.as_str()),
                scopes.to_space_separated(),
                Some(header.as_str()),
                Some(scheme.as_str()),
                None,
            ),
            GatewayAuth::None => (None, String::new(), None, None, None),
            GatewayAuth::SecretHeader { header, secret_sealed } => {
                (None, String::new(), Some(header.as_str()), None, Some(secret_sealed.clone()))
            }
            GatewayAuth::McpOauth { provider, scopes, settings, secret_sealed } => {
                oauth = Some(serde_json::to_string(settings).map_err(|e| StoreError::Corrupt(e.to_string()))?);
                (Some(provider.as_str()), scopes.to_space_separated(), None, None, secret_sealed.clone())
            }
            GatewayAuth::TokenExchange { service_id: id } => {
                service_id = Some(id.as_str());
                (None, String::new(), None, None, None)
            }
        };
        sqlx::query(&format!(
            "INSERT INTO gateway_servers ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
        ))
        .bind(&row.id)
        .bind(row.name.as_str())
        .bind(row.url.as_str())
        .bind(row.prefix.as_str())
        .bind(row.auth.kind())
        .bind(provider)
        .bind(scopes)
        .bind(header)
        .bind(scheme)
        .bind(secret)
        .bind(oauth)
        .bind(service_id)
        .bind(row.created_at)
        .bind(row.updated_at)
        // Every instance's gateway reloads its list when everyone's generation moves.
        .execute(self.store.write(CacheEffect::Everyone))
        .await
        .map_err(StoreError::from_write)?;
        Ok(())
    }

    /// Every registered server, by name.
    pub async fn list(self) -> StoreResult<Vec<GatewayServerRow>> {
        sqlx::query_as::<_, RawGatewayServer>(&format!("SELECT {COLUMNS} FROM gateway_servers ORDER BY name"))
            .fetch_all_in(self.store.read())
            .await?
            .into_iter()
            .map(GatewayServerRow::try_from)
            .collect()
    }

    pub async fn by_id(self, id: &str) -> StoreResult<Option<GatewayServerRow>> {
        sqlx::query_as::<_, RawGatewayServer>(&format!("SELECT {COLUMNS} FROM gateway_servers WHERE id = $1"))
            .bind(id)
            .fetch_optional_in(self.store.read())
            .await?
            .map(GatewayServerRow::try_from)
            .transpose()
    }

    pub async fn by_name(self, name: &str) -> StoreResult<Option<GatewayServerRow>> {
        sqlx::query_as::<_, RawGatewayServer>(&format!("SELECT {COLUMNS} FROM gateway_servers WHERE name = $1"))
            .bind(name)
            .fetch_optional_in(self.store.read())
            .await?
            .map(GatewayServerRow::try_from)
            .transpose()
    }

    /// Replaces an `mcp-oauth` server's settings and sealed client secret (`servers
    /// rediscover`); false if the server is gone. Every instance reloads it (a new
    /// `updated_at`), with its provider.
    pub async fn update_oauth(self, id: &str, auth: &GatewayAuth, now: Timestamp) -> StoreResult<bool> {
        let GatewayAuth::McpOauth { settings, secret_sealed, .. } = auth else {
            return Err(StoreError::Corrupt("only an mcp-oauth server's settings are replaced".into()));
        };
        let oauth = serde_json::to_string(settings).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let done =
            sqlx::query("UPDATE gateway_servers SET oauth = $1, secret_sealed = $2, updated_at = $3 WHERE id = $4")
                .bind(oauth)
                .bind(secret_sealed)
                .bind(now)
                .bind(id)
                .execute(self.store.write(CacheEffect::Everyone))
                .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Removes the server by name; false if there was none.
    pub async fn remove(self, name: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM gateway_servers WHERE name = $1")
            .bind(name)
            .execute(self.store.write(CacheEffect::Everyone))
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// One page of servers matching `search`, by name (the admin pages; one query).
    pub async fn page(self, search: &Search, window: Window) -> StoreResult<Paged<GatewayServerRow>> {
        let sql = ListSql {
            columns: COLUMNS,
            from: "gateway_servers",
            filter: "LOWER(name || ' ' || url || ' ' || prefix || ' ' || auth_kind || ' ' || COALESCE(provider, '')) \
                     LIKE {q} ESCAPE '\\'",
            indexed: None,
            chosen: None,
            order: "name",
            after: "name > {i}",
        };
        let key = |s: &RawGatewayServer| Cursor::new(0, s.name.clone());
        self.store.paged(sql, search, None, window, key).await?.try_map(GatewayServerRow::try_from)
    }

    /// The registered name of server `server_id`, if it is still registered.
    pub async fn name_of(self, server_id: &str) -> StoreResult<Option<String>> {
        let row: Option<(String,)> = sqlx::query_as("SELECT name FROM gateway_servers WHERE id = $1")
            .bind(server_id)
            .fetch_optional_in(self.store.read())
            .await?;
        Ok(row.map(|(name,)| name))
    }

    /// Gateway servers whose secret is not sealed by `active` (there are few: no paging).
    pub async fn secrets_to_rewrap(self, active: &str) -> StoreResult<Vec<(String, Vec<u8>)>> {
        let key_id = key_id_sql(self.store.backend(), "secret_sealed");
        Ok(sqlx::query_as::<_, (String, Vec<u8>)>(&format!(
            "SELECT id, secret_sealed FROM gateway_servers WHERE secret_sealed IS NOT NULL AND {key_id} <> $1 ORDER BY id"
        ))
        .bind(active)
        .fetch_all_in(self.store.read())
        .await?)
    }

    /// Replaces a gateway server's sealed secret if it is still `old`.
    pub async fn rewrap_secret(self, id: &str, old: &[u8], new: &[u8]) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE gateway_servers SET secret_sealed = $1 WHERE id = $2 AND secret_sealed = $3")
            .bind(new)
            .bind(id)
            .bind(old)
            // Every instance reloads its servers (and opens the secret again) on the move.
            .execute(self.store.write(CacheEffect::Everyone))
            .await
            .map_err(StoreError::from_write)?;
        Ok(done.rows_affected() == 1)
    }
}

impl GatewayServers<'_> {
    /// `admin keys forget`'s step for servers, within its transaction: a server whose secret
    /// header was sealed with `key_id` is removed (the operator adds it again with the secret).
    /// How many.
    pub(in crate::store) async fn forget_sealed_by(self, tx: &mut Transaction<'_>, key_id: &str) -> StoreResult<u64> {
        let secret = key_id_sql(self.store.backend(), "secret_sealed");
        let sql = format!("DELETE FROM gateway_servers WHERE secret_sealed IS NOT NULL AND {secret} = $1");
        let forget = sqlx::query(&sql).bind(key_id);
        // Every instance reloads its servers.
        Ok(On::Within(tx).execute(CacheEffect::Everyone, forget).await.map_err(StoreError::from_write)?.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::gateway::{CredentialHeader, CredentialScheme, ServerName};
    use crate::domain::{ProviderId, Scopes};
    use crate::providers::mcp_oauth::McpOauthSettings;
    use crate::store::gateway::server_rows::GatewayAuth;
    use crate::store::migrated_for_tests as store;
    use url::Url;

    fn row(name: &str, auth: GatewayAuth) -> GatewayServerRow {
        let name = ServerName::parse(name).unwrap();
        GatewayServerRow {
            id: format!("id-{name}"),
            prefix: name.default_prefix(),
            name,
            url: Url::parse("https://mcp.example/mcp").unwrap(),
            auth,
            created_at: 1,
            updated_at: 1,
        }
    }

    #[tokio::test]
    async fn every_auth_kind_round_trips_typed_and_names_and_prefixes_are_unique() {
        let (_dir, store) = store().await;
        let provider = GatewayAuth::Provider {
            provider: ProviderId::demo(),
            scopes: Scopes::parse(["profile"]).unwrap(),
            header: CredentialHeader::authorization(),
            scheme: CredentialScheme::bearer(),
        };
        let secret = GatewayAuth::SecretHeader {
            header: CredentialHeader::parse("X-Api-Key").unwrap(),
            secret_sealed: vec![1, 2, 3],
        };
        let settings = McpOauthSettings {
            resource: Url::parse("https://mcp.example/mcp").unwrap(),
            issuer: "https://as.example".into(),
            authorization_endpoint: Url::parse("https://as.example/authorize").unwrap(),
            token_endpoint: Url::parse("https://as.example/token").unwrap(),
            revocation_endpoint: None,
            scopes_supported: vec!["read".into()],
            registration: crate::providers::mcp_oauth::RegistrationKind::Dynamic,
            client_id: "client".into(),
            token_auth_method: crate::providers::mcp_oauth::StoredAuthMethod::ClientSecretBasic,
        };
        let oauth = GatewayAuth::McpOauth {
            provider: ProviderId::parse("mcp-e").unwrap(),
            scopes: Scopes::parse(["read"]).unwrap(),
            settings: Box::new(settings),
            secret_sealed: Some(vec![4, 5]),
        };
        let mut oauth_row = row("e", oauth);
        oauth_row.url = Url::parse("https://mcp.example/mcp").unwrap();
        let exchange = row("f", GatewayAuth::TokenExchange { service_id: "service-1".into() });
        let rows = [row("a", provider), row("b", GatewayAuth::None), row("c", secret), oauth_row, exchange];
        for r in &rows {
            store.gateway_servers().create(r).await.unwrap();
        }
        assert_eq!(store.gateway_servers().list().await.unwrap(), rows.to_vec());
        let mut again = rows[1].clone();
        again.id = "other".into();
        assert!(matches!(store.gateway_servers().create(&again).await, Err(StoreError::Conflict)), "same name");
        again.name = ServerName::parse("d").unwrap();
        assert!(matches!(store.gateway_servers().create(&again).await, Err(StoreError::Conflict)), "same prefix");
        assert!(store.gateway_servers().remove("b").await.unwrap());
        assert!(!store.gateway_servers().remove("b").await.unwrap());
        assert!(store.gateway_servers().by_name("b").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn nonsense_in_the_table_is_reported_as_corrupt() {
        let (_dir, store) = store().await;
        for (name, url, kind) in [
            ("Bad", "https://x.example/", "none"),
            ("b", "http://x.example/", "none"),
            ("c", "https://x.example/", "mcp-oauth"),
            ("e", "https://x.example/", "mcp_oauth"),
            ("d", "https://x.example/", "provider"),
            ("f", "https://x.example/", "token_exchange"),
        ] {
            sqlx::query(&format!(
                "INSERT INTO gateway_servers ({COLUMNS}) VALUES ($1, $1, $2, $1, $3, NULL, '', NULL, NULL, NULL, NULL, NULL, 1, 1)"
            ))
            .bind(name)
            .bind(url)
            .bind(kind)
            .execute(store.pool())
            .await
            .unwrap();
            assert!(matches!(store.gateway_servers().by_name(name).await, Err(StoreError::Corrupt(_))), "{name}");
            sqlx::query("DELETE FROM gateway_servers").execute(store.pool()).await.unwrap();
        }
    }
}
