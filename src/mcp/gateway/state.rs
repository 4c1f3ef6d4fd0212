//! The gateway's shared state ([`Gateway`]): the registered servers as this instance serves
//! them, this instance's connections to them, the tokens minted for `token-exchange` servers,
//! the calls waiting on a client's answer, and the HTTP clients. Started once with the app; the
//! catalogue keeps the servers current ([`super::catalogue`]).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use rmcp::model::{ErrorData, JsonObject, Tool};

use super::catalogue::registry::{ServerEntry, Servers, Target};
use super::forward::flight_home::FlightHome;
use super::forward::flights::{Flights, MAX_FLIGHTS};
use super::upstream::minted::MintedTokens;
use super::upstream::pool::{Pool, Sharing};
use crate::events::Signal;
use crate::state::AppState;

/// How long the holding instance has to accept the connection.
pub const CONNECT_WAIT: Duration = Duration::from_secs(2);

/// The servers behind the broker, their tools and this instance's connections to them.
pub struct Gateway {
    pub(crate) app: AppState,
    pub(crate) servers: RwLock<Arc<Servers>>,
    pub(crate) pool: Arc<Pool>,
    /// `token-exchange` servers' per-user tokens.
    pub minted: MintedTokens,
    /// Calls waiting for a 2026-07-28 client's answer to their server's question.
    pub flights: Arc<Flights>,
    /// This instance, as the home its flights' states name for the other instances.
    pub home: FlightHome,
    /// rmcp's reqwest client for every upstream connection: no redirects (an MCP endpoint that
    /// redirects is misconfigured or hostile, as for provider endpoints), bounded connect time.
    pub(crate) http: reqwest::Client,
    /// The client that passes a retry on to the instance whose flight waits for it
    /// ([`super::forward::retry_forward`]): no redirects, no proxy from the environment (the instances reach
    /// each other directly), a short connect wait.
    pub(crate) forwarding: reqwest::Client,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gateway({} servers)", self.servers().iter().count())
    }
}

impl Gateway {
    /// Reads the registered servers and starts watching for changes and sweeping idle
    /// connections, until the app shuts down.
    pub async fn start(app: AppState, sharing: Sharing) -> anyhow::Result<Arc<Self>> {
        let settings = &app.core.config.gateway;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(5))
            .build()?;
        let forwarding = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(CONNECT_WAIT)
            // The holding instance answers within its call timeout (a further question is an
            // answer too); past it, the instance is stuck and the client is let go.
            .timeout(settings.call_timeout + CONNECT_WAIT + Duration::from_secs(30))
            .build()?;
        let gateway = Arc::new(Self {
            forwarding,
            pool: Arc::new(Pool::new(settings.max_connections, settings.idle, sharing)),
            servers: RwLock::default(),
            minted: MintedTokens::default(),
            flights: Flights::new(settings.question_wait, MAX_FLIGHTS),
            home: FlightHome::default(),
            http,
            app: app.clone(),
        });
        gateway.reload().await?;
        gateway.pool.start_sweeping(app.shutdown.clone());
        Self::watch(&gateway);
        Self::hear_stored_lists(&gateway);
        Self::start_refreshing(&gateway);
        Ok(gateway)
    }

    /// How many connections to servers behind the broker this instance holds open.
    pub fn open_connections(&self) -> usize {
        self.pool.len()
    }

    pub(crate) fn servers(&self) -> Arc<Servers> {
        self.servers.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// What `tools/list` adds after the broker's own tools: each server's (or its connect
    /// tool), leaving out any name the broker's own tools already use.
    pub fn tools(&self, builtin: &[Tool]) -> Vec<Tool> {
        let servers = self.servers();
        let mut listed = Vec::new();
        for entry in servers.iter() {
            for tool in entry.listed() {
                if builtin.iter().any(|b| b.name == tool.name) {
                    tracing::warn!(server = %entry.row.name, "a server's tool has the name of one of the broker's; left out");
                    continue;
                }
                listed.push(tool);
            }
        }
        listed
    }

    /// The server and tool behind a listed name.
    pub fn resolve(&self, name: &str) -> Option<(Arc<ServerEntry>, Target)> {
        self.servers().resolve(name)
    }

    /// MCP server/tools: a server's tool is called only with arguments that fit the schema the
    /// client was shown (`-32602` naming the field otherwise), as the broker's own tools are.
    pub fn check(&self, entry: &ServerEntry, name: &str, arguments: Option<&JsonObject>) -> Result<(), ErrorData> {
        match entry.tools() {
            Some(tools) => tools.catalogue.check(name, arguments),
            None => Ok(()),
        }
    }

    /// `notifications/tools/list_changed` to every session and listening stream of this
    /// instance (each instance keeps its own lists, and hears of another's through
    /// `shared_lists`).
    pub(crate) fn tools_changed(&self) {
        self.app.core.events.signal(Signal::ToolsChanged);
    }
}
