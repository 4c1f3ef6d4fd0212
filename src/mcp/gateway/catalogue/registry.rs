//! This instance's view of the servers behind the broker and of each one's tools.
//!
//! The registered servers are read from the database at start and again whenever everyone's
//! cache generation moves (`store::generations`: migration 0022's triggers move it on every
//! change to `gateway_servers`, made here, by the admin CLI or by another instance), checked
//! every [`WATCH_EVERY`]. A server that appears gets an entry (its tools fetched at once if no
//! user's credential is needed); one that disappears has its connections closed.
//!
//! A server's tool list is cached in its entry and never fetched per request: filled from what
//! any instance last read of it (`super::shared_lists`), or else from the first connection any
//! user opens to it (tool lists are assumed the same for every user), refreshed when a
//! connection hears `notifications/tools/list_changed`. Each fill compiles the
//! input schemas once, so `tools/call` is checked against them as for the broker's own tools.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rmcp::model::{Tool, ToolAnnotations};
use secrecy::SecretString;

use super::listed::{ServerPrompts, ServerResources};
use crate::mcp::tools::schema::ToolCatalogue;
use crate::store::gateway::{GatewayAuth, GatewayServerRow, secret_seal_context};

/// How often the generation is compared (an atomic read; the database is read only on a move).
pub const WATCH_EVERY: Duration = Duration::from_millis(100);
/// Without a trusted generation (its watcher is late), the list is read this often anyway.
pub const READ_ANYWAY_EVERY: Duration = Duration::from_secs(5);

/// The suffix of the tool listed while a server's tools are unknown.
pub const CONNECT_TOOL: &str = "connect";

/// One registered server, as this instance serves it.
pub struct ServerEntry {
    pub row: GatewayServerRow,
    /// `secret_header`: the opened secret; `mcp_oauth`: the client secret, if registered with
    /// one (opened once, at load; never logged).
    pub secret: Option<SecretString>,
    tools: RwLock<Option<Arc<ServerTools>>>,
    /// Its prompts and resources ([`super::lists`]); empty until first read.
    prompts: RwLock<Arc<ServerPrompts>>,
    resources: RwLock<Arc<ServerResources>>,
    /// The protocol revision the server speaks, once a connection found out.
    pub revision: crate::mcp::gateway::upstream::revision::Remembered,
    /// Which stored version of each list (`super::shared_lists`) the cached one is.
    pub(crate) shared: super::list_versions::SharedVersions,
    /// Whether this process read the server's tools itself, rather than only taking what
    /// another instance (or an earlier start) stored.
    read_here: std::sync::atomic::AtomicBool,
    /// Users' own resources of this server ([`crate::mcp::gateway::forward::own_resources`]): when lists skip it
    /// after it did not answer, and whether a change it announced is about to be passed on.
    pub(crate) own: super::own_listing::OwnListing,
}

impl std::fmt::Debug for ServerEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ServerEntry({})", self.row.name)
    }
}

/// A server's tools as listed (prefixed), with the upstream name of each.
pub struct ServerTools {
    pub catalogue: ToolCatalogue,
    upstream: HashMap<String, String>,
}

impl ServerTools {
    /// The upstream tool a listed name stands for.
    pub fn upstream_name(&self, listed: &str) -> Option<&str> {
        self.upstream.get(listed).map(String::as_str)
    }

    pub fn names(&self) -> Vec<String> {
        self.catalogue.tools().iter().map(|t| t.name.to_string()).collect()
    }
}

impl ServerEntry {
    /// The entry for `row`; `None` (logged) if its secret does not open with the loaded keys.
    pub fn load(row: GatewayServerRow, sealer: &crate::crypto::Sealer) -> Option<Self> {
        let sealed = match &row.auth {
            GatewayAuth::SecretHeader { secret_sealed, .. } => Some(secret_sealed),
            GatewayAuth::McpOauth { secret_sealed, .. } => secret_sealed.as_ref(),
            _ => None,
        };
        let secret = match sealed {
            Some(secret_sealed) => match sealer.open(secret_sealed, secret_seal_context(&row.id)) {
                Ok(bytes) => Some(SecretString::from(String::from_utf8(bytes).ok()?)),
                Err(error) => {
                    tracing::error!(server = %row.name, %error, "a gateway server's secret does not open; the server is left out");
                    return None;
                }
            },
            None => None,
        };
        Some(Self {
            row,
            secret,
            tools: RwLock::default(),
            prompts: RwLock::default(),
            resources: RwLock::default(),
            revision: Default::default(),
            shared: Default::default(),
            read_here: Default::default(),
            own: Default::default(),
        })
    }

    /// Takes over what `earlier` — the same server before its row changed (`servers
    /// rediscover`: only its authorization server did) — had read of it: its lists and revision,
    /// so clients keep seeing its tools rather than its connect tool.
    pub fn inherit(&self, earlier: &ServerEntry) {
        *self.tools.write().unwrap_or_else(|p| p.into_inner()) = earlier.tools();
        *self.prompts.write().unwrap_or_else(|p| p.into_inner()) = earlier.prompts();
        *self.resources.write().unwrap_or_else(|p| p.into_inner()) = earlier.resources();
        if let Some(revision) = earlier.revision.get() {
            self.revision.set(revision);
        }
        self.shared.take_over(&earlier.shared);
        self.read_here.store(earlier.read_here.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// Claims this process's first read of the server's lists over a user's connection (true
    /// once, until [`ServerEntry::read_failed`]): lists taken from the database are read from
    /// the server once per process too, so a change made while no instance had a connection
    /// open is found.
    pub(crate) fn claim_first_read(&self) -> bool {
        // A load first: every forwarded call asks, and only the first may write.
        !self.read_here.load(Ordering::Acquire) && !self.read_here.swap(true, Ordering::AcqRel)
    }

    /// The tools were read from the server by this process.
    pub(crate) fn read_done(&self) {
        self.read_here.store(true, Ordering::Release);
    }

    /// A claimed first read failed: the next connection tries again.
    pub(crate) fn read_failed(&self) {
        self.read_here.store(false, Ordering::Release);
    }

    /// An `mcp-oauth` server's authorization server as a provider.
    pub fn provider(&self) -> Option<crate::providers::provider::ProviderConfig> {
        match &self.row.auth {
            GatewayAuth::McpOauth { settings, .. } => Some(settings.provider(&self.row.name, self.secret.clone())),
            _ => None,
        }
    }

    pub fn tools(&self) -> Option<Arc<ServerTools>> {
        self.tools.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn prompts(&self) -> Arc<ServerPrompts> {
        self.prompts.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn resources(&self) -> Arc<ServerResources> {
        self.resources.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the cached prompts; true if what clients see changed.
    pub fn set_prompts(&self, fresh: ServerPrompts) -> bool {
        let mut current = self.prompts.write().unwrap_or_else(|p| p.into_inner());
        let changed = current.listed != fresh.listed;
        *current = Arc::new(fresh);
        changed
    }

    /// Of the resources a read of the server found, those its shared list keeps: none for a
    /// server that acts as the user, whose resources are that user's own data
    /// ([`crate::mcp::gateway::forward::own_resources`]), all for one that serves every user alike.
    pub fn shared_resources(&self, read: Vec<rmcp::model::Resource>) -> Vec<rmcp::model::Resource> {
        if self.row.auth.per_user() { Vec::new() } else { read }
    }

    /// Replaces the cached resources and templates; true if what clients see changed.
    pub fn set_resources(&self, fresh: ServerResources) -> bool {
        let mut current = self.resources.write().unwrap_or_else(|p| p.into_inner());
        let changed = **current != fresh;
        *current = Arc::new(fresh);
        changed
    }

    /// The name of the tool listed while the server's tools are unknown.
    pub fn connect_tool_name(&self) -> String {
        format!("{}{CONNECT_TOOL}", self.row.prefix)
    }

    /// Replaces the cached tools with `upstream`'s list; true if what clients see changed.
    pub fn set_tools(&self, upstream: Vec<Tool>) -> bool {
        let mut listed = Vec::new();
        let mut names = HashMap::new();
        for mut tool in upstream {
            let Some(name) = self.row.prefix.apply(&tool.name) else {
                tracing::warn!(server = %self.row.name, "a tool whose name does not fit the prefix and MCP's name rules is left out");
                continue;
            };
            if names.contains_key(&name) {
                continue;
            }
            names.insert(name.clone(), tool.name.to_string());
            tool.name = name.into();
            listed.push(tool);
        }
        let before = self.tools().map(|t| t.catalogue.tools().to_vec());
        let changed = before.as_deref() != Some(listed.as_slice());
        let fresh = Arc::new(ServerTools { catalogue: ToolCatalogue::new(listed), upstream: names });
        *self.tools.write().unwrap_or_else(|p| p.into_inner()) = Some(fresh);
        changed
    }

    /// What `tools/list` shows of this server: its tools, or while they are unknown the one
    /// tool that connects the user and fills them.
    pub fn listed(&self) -> Vec<Tool> {
        if let Some(tools) = self.tools() {
            return tools.catalogue.tools().to_vec();
        }
        let schema = serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false});
        let mut annotations = ToolAnnotations::with_title(format!("Connect {}", self.row.name));
        annotations.read_only_hint = Some(true);
        annotations.open_world_hint = Some(true);
        vec![
            Tool::new(
                self.connect_tool_name(),
                format!(
                    "Connect {} to use its tools. You may be asked to approve in your browser; then its tools are listed.",
                    self.row.name
                ),
                Arc::new(schema.as_object().cloned().unwrap_or_default()),
            )
            .with_title(format!("Connect {}", self.row.name))
            .with_annotations(annotations),
        ]
    }
}

/// What a listed tool name stands for.
pub enum Target {
    /// One of the server's own tools, by its upstream name.
    Tool(String),
    /// The connect tool of a server whose tools are not known yet.
    Connect,
}

/// The servers, in name order.
#[derive(Default)]
pub struct Servers(Vec<Arc<ServerEntry>>);

impl Servers {
    pub fn new(entries: Vec<Arc<ServerEntry>>) -> Self {
        Self(entries)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<ServerEntry>> {
        self.0.iter()
    }

    pub fn by_id(&self, id: &str) -> Option<&Arc<ServerEntry>> {
        self.0.iter().find(|e| e.row.id == id)
    }

    /// The server and tool a listed name stands for. Prefixes never overlap (checked at
    /// registration), so at most one server's prefix begins the name.
    pub fn resolve(&self, name: &str) -> Option<(Arc<ServerEntry>, Target)> {
        let entry = self.0.iter().find(|e| name.starts_with(e.row.prefix.as_str()))?;
        match entry.tools() {
            Some(tools) => tools.upstream_name(name).map(|t| (entry.clone(), Target::Tool(t.to_owned()))),
            None if name == entry.connect_tool_name() => Some((entry.clone(), Target::Connect)),
            None => None,
        }
    }
}
