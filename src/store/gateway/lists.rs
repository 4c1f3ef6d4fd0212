//! Each gateway server's lists as last read from it (migration 0037), shared by every instance
//! and kept across restarts: the server's own answer as JSON, one row per server and kind.
//! Nothing a cache reads: the instances hear of a new list through a signal
//! ([`crate::events::Signal::GatewayListsStored`]), not through the generations.

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::placeholders::numbered_values;
use crate::store::machinery::store::Store;

/// The handle on the servers' stored lists: `store.gateway_lists()`.
#[derive(Debug, Clone, Copy)]
pub struct GatewayLists<'s> {
    pub(in crate::store) store: &'s Store,
}

/// Which of a server's lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Prompts,
    /// Resources and resource templates, read together.
    Resources,
}

impl ListKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tools => "tools",
            Self::Prompts => "prompts",
            Self::Resources => "resources",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "tools" => Some(Self::Tools),
            "prompts" => Some(Self::Prompts),
            "resources" => Some(Self::Resources),
            _ => None,
        }
    }
}

/// One stored list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredList {
    pub server_id: String,
    pub kind: ListKind,
    /// The server's answer, as JSON.
    pub listed: String,
    /// Moves by one on every write of this server's list of this kind.
    pub version: i64,
    /// When an instance last stored a changed list.
    pub stored_at: Timestamp,
}

/// How many of each a server's stored lists hold (what operators see); `None` for a list no
/// instance has read yet (or whose stored answer does not parse, which the gateway does not
/// list either).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListSummary {
    pub tools: Option<usize>,
    /// When an instance last read a changed tool list.
    pub tools_stored_at: Option<Timestamp>,
    pub prompts: Option<usize>,
    pub resources: Option<usize>,
    pub templates: Option<usize>,
}

impl ListSummary {
    /// The summary of `server_id`'s lists among `stored`.
    pub fn of(server_id: &str, stored: &[StoredList]) -> Self {
        let mut summary = Self::default();
        for list in stored.iter().filter(|l| l.server_id == server_id) {
            let Ok(value) = serde_json::from_str::<serde_json::Value>(&list.listed) else { continue };
            let count = |v: &serde_json::Value| v.as_array().map(Vec::len);
            match list.kind {
                ListKind::Tools => {
                    summary.tools = count(&value);
                    summary.tools_stored_at = summary.tools.map(|_| list.stored_at);
                }
                ListKind::Prompts => summary.prompts = count(&value),
                ListKind::Resources => {
                    summary.resources = count(&value["resources"]);
                    summary.templates = count(&value["templates"]);
                }
            }
        }
        summary
    }
}

#[derive(sqlx::FromRow)]
struct RawList {
    server_id: String,
    kind: String,
    listed: String,
    version: i64,
    stored_at: i64,
}

impl RawList {
    /// `None` for a kind this build does not know (a newer instance's): skipped, not an error.
    fn typed(self) -> Option<StoredList> {
        let kind = ListKind::parse(&self.kind)?;
        Some(StoredList {
            server_id: self.server_id,
            kind,
            listed: self.listed,
            version: self.version,
            stored_at: self.stored_at,
        })
    }
}

const COLUMNS: &str = "server_id, kind, listed, version, stored_at";

impl GatewayLists<'_> {
    /// Every server's stored lists (a few rows per registered server).
    pub async fn all(self) -> StoreResult<Vec<StoredList>> {
        let rows = sqlx::query_as::<_, RawList>(&format!(
            "SELECT {COLUMNS} FROM gateway_server_lists ORDER BY server_id, kind"
        ))
        .fetch_all_in(self.store.read())
        .await?;
        Ok(rows.into_iter().filter_map(RawList::typed).collect())
    }

    /// One server's stored lists.
    pub async fn of(self, server_id: &str) -> StoreResult<Vec<StoredList>> {
        let rows = sqlx::query_as::<_, RawList>(&format!(
            "SELECT {COLUMNS} FROM gateway_server_lists WHERE server_id = $1 ORDER BY kind"
        ))
        .bind(server_id)
        .fetch_all_in(self.store.read())
        .await?;
        Ok(rows.into_iter().filter_map(RawList::typed).collect())
    }

    /// The stored lists of these servers (a page of the admin list), in one read.
    pub async fn for_servers(self, server_ids: &[&str]) -> StoreResult<Vec<StoredList>> {
        if server_ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {COLUMNS} FROM gateway_server_lists WHERE server_id IN ({}) ORDER BY server_id, kind",
            numbered_values(server_ids.len())
        );
        let mut query = sqlx::query_as::<_, RawList>(&sql);
        for id in server_ids {
            query = query.bind(*id);
        }
        Ok(query.fetch_all_in(self.store.read()).await?.into_iter().filter_map(RawList::typed).collect())
    }

    /// Keeps `listed` as the server's `kind` list, replacing the one before; the row's new
    /// version, or `None` if the server is not registered (any more): nothing is kept for it.
    pub async fn put(self, server_id: &str, kind: ListKind, listed: &str, now: Timestamp) -> StoreResult<Option<i64>> {
        // The server may be removed between the read and this write: the row is written only
        // while it exists (a removal after deletes it with the server; one that commits while
        // this statement runs fails its foreign key on PostgreSQL, which is the same answer).
        let written = sqlx::query_as::<_, (i64,)>(
            "INSERT INTO gateway_server_lists (server_id, kind, listed, version, stored_at) \
             SELECT id, $2, $3, 1, $4 FROM gateway_servers WHERE id = $1 \
             ON CONFLICT (server_id, kind) DO UPDATE SET listed = excluded.listed, \
             version = gateway_server_lists.version + 1, stored_at = excluded.stored_at \
             RETURNING version",
        )
        .bind(server_id)
        .bind(kind.as_str())
        .bind(listed)
        .bind(now)
        .fetch_optional(self.store.write(CacheEffect::Nothing))
        .await;
        match written {
            Ok(row) => Ok(row.map(|(version,)| version)),
            Err(sqlx::Error::Database(error)) if error.is_foreign_key_violation() => Ok(None),
            Err(error) => Err(error.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::gateway::ServerName;
    use crate::store::gateway::server_rows::{GatewayAuth, GatewayServerRow};
    use crate::store::migrated_for_tests as store;

    async fn register(store: &Store, name: &str) -> String {
        let name = ServerName::parse(name).unwrap();
        let row = GatewayServerRow {
            id: format!("id-{name}"),
            prefix: name.default_prefix(),
            name,
            url: url::Url::parse("https://mcp.example/mcp").unwrap(),
            auth: GatewayAuth::None,
            created_at: 1,
            updated_at: 1,
        };
        store.gateway_servers().create(&row).await.unwrap();
        row.id
    }

    #[tokio::test]
    async fn a_list_is_kept_replaced_and_removed_with_its_server() {
        let (_dir, store) = store().await;
        let a = register(&store, "a").await;
        let b = register(&store, "b").await;

        assert_eq!(store.gateway_lists().put(&a, ListKind::Tools, "[1]", 10).await.unwrap(), Some(1));
        assert_eq!(store.gateway_lists().put(&a, ListKind::Prompts, "[2]", 10).await.unwrap(), Some(1));
        assert_eq!(store.gateway_lists().put(&b, ListKind::Resources, "{}", 11).await.unwrap(), Some(1));
        assert_eq!(store.gateway_lists().put(&a, ListKind::Tools, "[3]", 12).await.unwrap(), Some(2), "replaced");

        let of_a = store.gateway_lists().of(&a).await.unwrap();
        let kinds: Vec<(ListKind, &str, i64, i64)> =
            of_a.iter().map(|l| (l.kind, l.listed.as_str(), l.version, l.stored_at)).collect();
        assert_eq!(kinds, [(ListKind::Prompts, "[2]", 1, 10), (ListKind::Tools, "[3]", 2, 12)]);
        assert_eq!(store.gateway_lists().all().await.unwrap().len(), 3);
        let of_b: Vec<String> = store
            .gateway_lists()
            .for_servers(&[b.as_str(), "id-nobody"])
            .await
            .unwrap()
            .into_iter()
            .map(|l| l.server_id)
            .collect();
        assert_eq!(of_b, std::slice::from_ref(&b), "only the servers asked for");
        assert_eq!(store.gateway_lists().for_servers(&[a.as_str(), b.as_str()]).await.unwrap().len(), 3);
        assert!(store.gateway_lists().for_servers(&[]).await.unwrap().is_empty());

        // A server that is not registered keeps nothing; a removed one loses its lists.
        assert_eq!(store.gateway_lists().put("id-nobody", ListKind::Tools, "[]", 13).await.unwrap(), None);
        assert!(store.gateway_servers().remove("a").await.unwrap());
        assert!(store.gateway_lists().of(&a).await.unwrap().is_empty());
        assert_eq!(store.gateway_lists().all().await.unwrap().len(), 1, "b's stays");
    }

    #[tokio::test]
    async fn a_kind_this_build_does_not_know_is_skipped() {
        let (_dir, store) = store().await;
        let a = register(&store, "a").await;
        store.gateway_lists().put(&a, ListKind::Tools, "[]", 1).await.unwrap();
        sqlx::query(
            "INSERT INTO gateway_server_lists (server_id, kind, listed, version, stored_at) VALUES ($1, 'widgets', '[]', 1, 1)",
        )
        .bind(&a)
        .execute(store.pool())
        .await
        .unwrap();
        let kinds: Vec<ListKind> = store.gateway_lists().of(&a).await.unwrap().iter().map(|l| l.kind).collect();
        assert_eq!(kinds, [ListKind::Tools]);
    }

    #[tokio::test]
    async fn a_summary_counts_each_list_and_leaves_unread_ones_unknown() {
        let (_dir, store) = store().await;
        let a = register(&store, "a").await;
        store.gateway_lists().put(&a, ListKind::Tools, r#"[{"name":"x"},{"name":"y"}]"#, 7).await.unwrap();
        store.gateway_lists().put(&a, ListKind::Resources, r#"{"resources":[{}],"templates":[]}"#, 8).await.unwrap();
        store.gateway_lists().put(&a, ListKind::Prompts, "not json", 9).await.unwrap();
        let stored = store.gateway_lists().all().await.unwrap();
        let expected = ListSummary {
            tools: Some(2),
            tools_stored_at: Some(7),
            prompts: None,
            resources: Some(1),
            templates: Some(0),
        };
        assert_eq!(ListSummary::of(&a, &stored), expected, "an answer that does not parse counts as not read");
        assert_eq!(ListSummary::of("id-other", &stored), ListSummary::default());
    }
}
