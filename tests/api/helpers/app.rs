//! The app under test: [`spawn_app`] runs the real application on a random port with a fresh
//! database (SQLite in a temp dir, or a fresh PostgreSQL database) and a clock the test controls,
//! and [`TestApp`] is what a test holds of it.

use std::sync::Arc;
use std::time::Duration;

use oauth_broker::App;
use oauth_broker::clock::ManualClock;
use oauth_broker::config::{Config, SettingsArgs};
use oauth_broker::identity::password;
use oauth_broker::state::AppState;
use secrecy::SecretString;

use super::database::PostgresDb;
use super::{ALICE, BOB, Backend, PASSWORD};

pub struct TestApp {
    /// `http://127.0.0.1:PORT`
    pub address: String,
    /// The database this app uses (not rewritten through a proxy).
    pub database_url: String,
    pub state: AppState,
    pub clock: ManualClock,
    /// How many of this app's MCP sessions are parked now.
    pub parked: Arc<oauth_broker::mcp::transport::session_transport::ParkedCount>,
    /// The servers behind this app, with what it minted for them.
    pub gateway: Arc<oauth_broker::mcp::gateway::state::Gateway>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    /// The server's run, to wait for its graceful stop ([`TestApp::stop_serving`]).
    serving: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    _data_dir: tempfile::TempDir,
    postgres: Option<PostgresDb>,
}

pub async fn spawn_app(backend: Backend) -> Option<TestApp> {
    spawn_app_with(backend, |builder| builder).await
}

/// [`spawn_app`] with the app builder changed first (extensions).
pub async fn spawn_app_with(
    backend: Backend,
    extend: impl FnOnce(oauth_broker::app::AppBuilder) -> oauth_broker::app::AppBuilder,
) -> Option<TestApp> {
    spawn_app_opts(backend, SpawnOptions::default(), extend).await
}

/// Turns the database URL into the one the app connects to.
pub type UrlRewrite = Box<dyn FnOnce(&str) -> String + Send>;

/// The servers these tests run in-process log to the test's captured output, which the test
/// harness prints only when a test fails: a 500 seen by a test comes with the server's reason
/// (`TEST_LOG` takes a filter, `warn` by default). Benches share this file and print their own
/// figures: no log there.
fn show_server_warnings_on_failure() {
    if !cfg!(test) {
        return;
    }
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::try_from_env("TEST_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        // Another test's own subscriber may already be the global one: then it stays.
        let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
    });
}

/// What [`spawn_app_opts`] may change.
#[derive(Default)]
pub struct SpawnOptions {
    /// Appended to the config file (providers, timeouts).
    pub toml: String,
    /// Rewrites the database URL the app connects to (e.g. through a [`crate::helpers::db_proxy`]).
    pub database_url: Option<UrlRewrite>,
    /// Another instance of this app: same database, key and public URL, users already there.
    pub instance_of: Option<Instance>,
    /// PostgreSQL: the signal listener's URL, from the database URL (e.g. through a
    /// [`crate::helpers::db_proxy`] that cuts the listener alone).
    pub signal_listener_url: Option<UrlRewrite>,
    /// With [`SpawnOptions::instance_of`]: serve at this instance's own address as its public
    /// URL, as a broker that moved (the users stay those created under the first one's).
    pub own_public_url: bool,
    /// Keep the encryption key where an operator without `OAUTH_BROKER_ENCRYPTION_KEY` has it:
    /// `data_dir/encryption.key`, made on first start (the key rotation tests).
    pub key_in_data_dir: bool,
    /// The clock's start (Unix seconds) instead of now: a database made earlier, whose
    /// sessions and links must still be live (the upgrade test).
    pub clock_at: Option<i64>,
    /// Listen here instead of on a random port (a database whose public URL names this
    /// address, where the demo provider must answer: the upgrade test).
    pub listen: Option<std::net::SocketAddr>,
}

/// What a second instance shares with the first (see [`TestApp::instance`]).
#[derive(Clone)]
pub struct Instance {
    pub database_url: String,
    pub encryption_key: SecretString,
    pub public_url: String,
}

/// [`spawn_app`] with [`SpawnOptions`] and the app builder changed first.
pub async fn spawn_app_opts(
    backend: Backend,
    options: SpawnOptions,
    extend: impl FnOnce(oauth_broker::app::AppBuilder) -> oauth_broker::app::AppBuilder,
) -> Option<TestApp> {
    show_server_warnings_on_failure();
    let data_dir = tempfile::tempdir().unwrap();
    let (database_url, postgres) = match (&options.instance_of, backend) {
        (Some(first), _) => (first.database_url.clone(), None),
        (None, Backend::Sqlite) => (format!("sqlite://{}/broker.db?mode=rwc", data_dir.path().display()), None),
        (None, Backend::Postgres) => {
            let db = PostgresDb::create().await?;
            (db.url.clone(), Some(db))
        }
    };
    let connect_url = match options.database_url {
        Some(rewrite) => rewrite(&database_url),
        None => database_url.clone(),
    };
    let listener = tokio::net::TcpListener::bind(options.listen.unwrap_or(([127, 0, 0, 1], 0).into())).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let own_address = format!("http://127.0.0.1:{port}");
    let public_url = match &options.instance_of {
        Some(first) if !options.own_public_url => first.public_url.clone(),
        _ => own_address.clone(),
    };
    let args = SettingsArgs {
        listen: Some(listener.local_addr().unwrap()),
        public_url: Some(public_url.parse().unwrap()),
        database_url: Some(connect_url),
        data_dir: Some(data_dir.path().to_path_buf()),
        demo: true,
        config: None,
        ..Default::default()
    };
    let toml = format!("connect_wait = \"20s\"\nprogress_interval = \"200ms\"\n{}", options.toml);
    let mut config = Config::from_toml(&args, &toml).unwrap();
    config.signal_listener_url = options.signal_listener_url.map(|rewrite| rewrite(&database_url));
    config.encryption_key = Some(match &options.instance_of {
        Some(first) => first.encryption_key.clone(),
        None => SecretString::from(oauth_broker::crypto::Sealer::generate_key()),
    });
    if options.key_in_data_dir {
        config.encryption_key = None;
    }
    let clock = options.clock_at.map_or_else(ManualClock::starting_now, ManualClock::new);
    let app = extend(App::builder(config, Arc::new(clock.clone()))).build().await.unwrap();
    let state = app.state().clone();
    let parked = app.parked_mcp_sessions();
    let gateway = app.gateway();
    if options.instance_of.is_none() {
        for name in [ALICE, BOB] {
            let hash = password::hash_password(&SecretString::from(PASSWORD.to_string())).unwrap();
            state
                .core
                .store
                .users()
                .create_local(&state.core.config.issuer(), name, &hash, clock.now_secs())
                .await
                .unwrap();
        }
    }
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(app.run(listener, async move {
        let _ = rx.await;
    }));
    Some(TestApp {
        address: own_address,
        database_url,
        state,
        clock,
        parked,
        gateway,
        shutdown: Some(tx),
        serving: Some(serving),
        _data_dir: data_dir,
        postgres,
    })
}

trait NowSecs {
    fn now_secs(&self) -> i64;
}

impl NowSecs for ManualClock {
    fn now_secs(&self) -> i64 {
        use oauth_broker::clock::Clock;
        self.now()
    }
}

impl TestApp {
    /// Stops the server the way SIGTERM does and waits until its run has ended (every
    /// connection closed, the audit queue written); the store stays open for the test to read.
    #[allow(dead_code, reason = "used by the token API's audit tests")]
    pub async fn stop_serving(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(serving) = self.serving.take() {
            serving.await.unwrap().unwrap();
        }
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.state.core.store.close().await;
        if let Some(db) = self.postgres.take() {
            db.drop_database().await;
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    /// What a second instance of this app shares with it ([`SpawnOptions::instance_of`]).
    #[allow(dead_code, reason = "used by the refresh fault tests")]
    pub fn instance(&self) -> Instance {
        Instance {
            database_url: self.database_url.clone(),
            encryption_key: self.state.core.config.encryption_key.clone().expect("tests set the key"),
            public_url: self.state.core.config.public_url.as_str().trim_end_matches('/').to_owned(),
        }
    }

    pub fn mcp_url(&self) -> String {
        self.url("/mcp")
    }

    /// The app's data directory (its SQLite database, and its key with
    /// [`SpawnOptions::key_in_data_dir`]).
    #[allow(dead_code, reason = "used by the key rotation tests")]
    pub fn data_dir(&self) -> &std::path::Path {
        self._data_dir.path()
    }

    pub fn now(&self) -> i64 {
        self.clock.now_secs()
    }

    pub async fn user_id(&self, name: &str) -> String {
        self.state.core.store.users().by_username(name).await.unwrap().unwrap().id
    }

    /// A bearer token for a test user, signed by the broker's own key.
    pub async fn token_for(&self, name: &str) -> String {
        let user = self.state.core.store.users().by_username(name).await.unwrap().unwrap();
        self.state.identity.keys.issue(&user.subject, Some(name), self.now(), 400 * 24 * 3600).unwrap()
    }

    /// A bearer token for `name` issued for one program (`admin tokens issue --client LABEL`):
    /// to the broker, a different client from [`Self::token_for`]'s.
    #[allow(dead_code, reason = "used by the consent tests")]
    pub async fn token_for_client(&self, name: &str, client: &str) -> String {
        let user = self.state.core.store.users().by_username(name).await.unwrap().unwrap();
        self.state
            .identity
            .keys
            .issue_labelled(&user.subject, Some(name), Some(client), self.now(), 400 * 24 * 3600)
            .unwrap()
    }

    /// An HTTP client that keeps cookies and does not follow redirects (tests follow them
    /// one hop at a time to check each).
    pub fn browser(&self) -> reqwest::Client {
        reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap()
    }

    /// A plain HTTP client (no cookies, no redirects).
    pub fn http(&self) -> reqwest::Client {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap()
    }
}
