//! Opening a connection to a server behind the broker in the revision it speaks
//! ([`super::revision`]): the first connection to a server asks `server/discover` (MCP
//! 2026-07-28) and falls back to `initialize` (2025-11-25) when the server cannot answer it;
//! the answer is remembered on the server's entry, and later connections open that way at once.
//! A refusal of the credential (401) says nothing about the revision and is passed on as it is,
//! so the call's one refresh and retry ([`crate::mcp::gateway::forward::gates`]) happen as for any
//! connection.

use std::sync::Arc;
use std::time::Duration;

use rmcp::service::{ClientInitializeError, ClientServiceExt};

use super::client::{ServerNews, UpstreamHandler};
use super::credential::{CredentialCell, unauthorized};
use super::pool::Upstream;
use super::revision::Revision;
use super::transport::{CredentialedClient, FewRetries, LogTally};
use crate::mcp::gateway::catalogue::registry::ServerEntry;
use crate::mcp::gateway::state::Gateway;

/// How long the first `server/discover` may take before the server counts as one that ignores
/// it (rmcp's own automatic fallback waits as long).
const DISCOVER_WAIT: Duration = Duration::from_secs(10);

impl Gateway {
    /// Opens `user_id`'s connection to `entry` (`None`: a connection of no user's, for a server
    /// that needs no user's credential), whose requests carry what `cell` holds, in the revision
    /// the server speaks (found out by the first connection, then remembered).
    pub(crate) async fn open(
        self: &Arc<Self>,
        entry: &Arc<ServerEntry>,
        cell: Arc<CredentialCell>,
        user_id: Option<&str>,
    ) -> Result<Upstream, ClientInitializeError> {
        if let Some(known) = entry.revision.get() {
            return self.open_as(entry, cell, known, user_id).await;
        }
        let discovered =
            tokio::time::timeout(DISCOVER_WAIT, self.open_as(entry, cell.clone(), Revision::Stateless, user_id)).await;
        match discovered {
            Ok(Ok(connection)) => {
                entry.revision.set(Revision::Stateless);
                tracing::info!(server = %entry.row.name, "a server behind the broker speaks 2026-07-28; its calls are stateless");
                return Ok(connection);
            }
            // Refused for the credential: no answer about the revision yet.
            Ok(Err(error)) if unauthorized(&error) => return Err(error),
            Ok(Err(error)) => {
                tracing::debug!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "server/discover failed; trying initialize")
            }
            Err(_) => tracing::debug!(server = %entry.row.name, "server/discover got no answer; trying initialize"),
        }
        let connection = self.open_as(entry, cell, Revision::Sessions, user_id).await?;
        entry.revision.set(Revision::Sessions);
        tracing::info!(server = %entry.row.name, "a server behind the broker speaks 2025-11-25 sessions");
        Ok(connection)
    }

    async fn open_as(
        self: &Arc<Self>,
        entry: &Arc<ServerEntry>,
        cell: Arc<CredentialCell>,
        revision: Revision,
        user_id: Option<&str>,
    ) -> Result<Upstream, ClientInitializeError> {
        let logs = Arc::new(LogTally::default());
        let client = CredentialedClient::new(self.http.clone(), cell.clone(), logs.clone());
        let mut config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            entry.row.url.as_str().to_owned(),
        );
        config.retry_config = Arc::new(FewRetries);
        let transport = rmcp::transport::StreamableHttpClientTransport::with_client(client, config);
        let news: std::sync::Weak<dyn ServerNews> = Arc::downgrade(self) as std::sync::Weak<Gateway>;
        let handler = UpstreamHandler::new(news, entry, user_id, logs);
        let service = handler.serve_with_lifecycle(transport, revision.lifecycle()).await?;
        Ok(Upstream::new(service, cell))
    }
}
