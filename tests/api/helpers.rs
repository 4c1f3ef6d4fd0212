//! `spawn_app` runs the real application on a random port with a fresh database (SQLite in a
//! temp dir, or a fresh PostgreSQL database) and a clock the test controls. `TestApp` has a
//! real rmcp client (`mcp_client`) and a cookie-keeping HTTP client that plays the browser
//! (`browser`), plus one helper per step of the flow.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use oauth_broker::App;
use oauth_broker::clock::ManualClock;
use oauth_broker::config::{Config, SettingsArgs};
use oauth_broker::identity::password;
use oauth_broker::state::AppState;
use rmcp::model::ProtocolVersion;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CustomNotification, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ErrorData, FormElicitationCapability, Implementation, UrlElicitationCapability,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, NotificationContext, RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient};
use secrecy::SecretString;
use tokio::sync::{Mutex, mpsc};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub const ALICE: &str = "alice";
pub const BOB: &str = "bob";
pub const PASSWORD: &str = "correct-horse-battery";

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

/// Runs a test body on SQLite and on PostgreSQL. Without a PostgreSQL server the second run
/// prints `SKIPPED postgres: …`, unless `REQUIRE_POSTGRES=1`, where it fails.
#[macro_export]
macro_rules! on_both_backends {
    ($name:ident, $body:ident) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let app = $crate::helpers::spawn_app($crate::helpers::Backend::Sqlite).await.unwrap();
                $body(&app).await;
                app.stop().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(app) = $crate::helpers::spawn_app($crate::helpers::Backend::Postgres).await else { return };
                $body(&app).await;
                app.stop().await;
            }
        }
    };
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
    /// Rewrites the database URL the app connects to (e.g. through a [`crate::db_proxy`]).
    pub database_url: Option<UrlRewrite>,
    /// Another instance of this app: same database, key and public URL, users already there.
    pub instance_of: Option<Instance>,
    /// PostgreSQL: the signal listener's URL, from the database URL (e.g. through a
    /// [`crate::db_proxy`] that cuts the listener alone).
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

    /// Approves a consent-only link ("let this client use your connection") as `name`:
    /// signs in if needed, checks the page asks nothing of the provider, and allows.
    #[allow(dead_code, reason = "used by the consent tests")]
    pub async fn allow_in_browser(&self, browser: &reqwest::Client, connect_url: &str, name: &str) -> String {
        let path = connect_url.strip_prefix(&self.address).expect("connect URL is ours");
        if browser.get(connect_url).send().await.unwrap().status() == 303 {
            assert_eq!(self.sign_in(browser, name, path).await.status(), 303, "sign-in redirects back");
        }
        let page = browser.get(connect_url).send().await.unwrap();
        assert_eq!(page.status(), 200, "consent page");
        let html = page.text().await.unwrap();
        assert!(html.contains("Allow this client"), "a consent-only page: {html}");
        let csrf = hidden_field(&html, "csrf_token").expect("consent form has a CSRF token");
        let allowed = browser
            .post(connect_url)
            .form(&[("csrf_token", csrf.as_str()), ("action", "approve")])
            .send()
            .await
            .unwrap();
        assert_eq!(allowed.status(), 200, "allowing ends here: no trip to the provider");
        html
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

    /// A real rmcp client with the given elicitation capabilities, authenticated as `name`.
    pub async fn mcp_client(&self, name: &str, kind: ClientKind) -> McpClient {
        let token = self.token_for(name).await;
        self.mcp_client_with_token(&token, kind).await.unwrap()
    }

    pub async fn mcp_client_with_token(
        &self,
        token: &str,
        kind: ClientKind,
    ) -> Result<McpClient, rmcp::service::ClientInitializeError> {
        mcp_client_at(&self.mcp_url(), token, kind).await
    }

    /// A real rmcp client speaking MCP 2026-07-28 (`server/discover`, no session, everything in
    /// each request's `_meta`), authenticated as `name`. Its `call_tool` drives
    /// `InputRequiredResult` rounds itself through its elicitation handler.
    #[allow(dead_code, reason = "used by the round-trip tests")]
    pub async fn mcp_client_2026(&self, name: &str, kind: ClientKind) -> McpClient {
        let token = self.token_for(name).await;
        let lifecycle = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
        mcp_client_with_lifecycle(&self.mcp_url(), &token, kind, lifecycle).await.unwrap()
    }

    /// Signs `name` in on this browser (following the login form).
    pub async fn sign_in(&self, browser: &reqwest::Client, name: &str, next: &str) -> reqwest::Response {
        let page = browser.get(self.url(&format!("/login?next={}", urlencode(next)))).send().await.unwrap();
        assert_eq!(page.status(), 200, "login page");
        let html = page.text().await.unwrap();
        let csrf = hidden_field(&html, "csrf_token").expect("login form has a CSRF field");
        browser
            .post(self.url("/login"))
            .form(&[("username", name), ("password", PASSWORD), ("next", next), ("csrf_token", &csrf)])
            .send()
            .await
            .unwrap()
    }

    /// The whole browser leg for a connect URL, as `name`, approving at the broker and at the
    /// demo provider. Returns the final callback response.
    pub async fn approve_in_browser(
        &self,
        browser: &reqwest::Client,
        connect_url: &str,
        name: &str,
    ) -> reqwest::Response {
        self.approve_in_browser_as(browser, connect_url, name, "demo-user").await
    }

    /// [`Self::approve_in_browser`], choosing `account` at the demo provider.
    pub async fn approve_in_browser_as(
        &self,
        browser: &reqwest::Client,
        connect_url: &str,
        name: &str,
        account: &str,
    ) -> reqwest::Response {
        let path = connect_url.strip_prefix(&self.address).expect("connect URL is ours");
        let first = browser.get(connect_url).send().await.unwrap();
        if first.status() == 303 {
            let signed_in = self.sign_in(browser, name, path).await;
            assert_eq!(signed_in.status(), 303, "sign-in redirects back");
        }
        let consent = browser.get(connect_url).send().await.unwrap();
        assert_eq!(consent.status(), 200, "consent page");
        let html = consent.text().await.unwrap();
        let csrf = hidden_field(&html, "csrf_token").expect("consent form has a CSRF token");
        let approved = browser
            .post(connect_url)
            .form(&[("csrf_token", csrf.as_str()), ("action", "approve")])
            .send()
            .await
            .unwrap();
        assert_eq!(approved.status(), 303, "approve redirects to the provider");
        let provider_url = location(&approved);
        self.approve_at_demo_provider(browser, &provider_url, account).await
    }

    /// At the demo provider's authorize page: approve as `account`, then follow the redirect
    /// back to our callback.
    pub async fn approve_at_demo_provider(
        &self,
        browser: &reqwest::Client,
        authorize_url: &str,
        account: &str,
    ) -> reqwest::Response {
        let callback_url = self.demo_provider_redirect(browser, authorize_url, account, "approve").await;
        self.land(browser, &callback_url).await
    }

    /// Opens the provider's redirect to our callback in `browser`. The callback never shows a
    /// page itself (its URL holds the code and state): it must answer 303 to one of our own
    /// clean addresses, which this opens and returns.
    pub async fn land(&self, browser: &reqwest::Client, callback_url: &str) -> reqwest::Response {
        let response = browser.get(callback_url).send().await.unwrap();
        assert_eq!(response.status(), 303, "the callback redirects to a clean page");
        let target = location(&response);
        assert!(target.starts_with('/') && !target.starts_with("//"), "a page of ours: {target}");
        assert!(!target.contains('?'), "the clean page's address has no query: {target}");
        let sent = url::Url::parse(callback_url).unwrap();
        for (name, value) in sent.query_pairs().filter(|(k, v)| ["code", "state"].contains(&k.as_ref()) && v.len() > 4)
        {
            assert!(!target.contains(value.as_ref()), "the clean page's address holds no {name}: {target}");
        }
        browser.get(self.url(&target)).send().await.unwrap()
    }

    /// Submits the demo provider's approve page and returns where it redirects (our callback).
    pub async fn demo_provider_redirect(
        &self,
        browser: &reqwest::Client,
        authorize_url: &str,
        account: &str,
        decision: &str,
    ) -> String {
        let page = browser.get(authorize_url).send().await.unwrap();
        assert_eq!(page.status(), 200, "demo provider approve page");
        let html = page.text().await.unwrap();
        let mut form: Vec<(String, String)> = hidden_fields(&html);
        form.retain(|(k, _)| k != "account" && k != "decision");
        form.push(("account".into(), account.into()));
        form.push(("decision".into(), decision.into()));
        let answer = browser.post(self.url("/demo-provider/authorize")).form(&form).send().await.unwrap();
        assert_eq!(answer.status(), 302, "demo provider redirects back");
        location(&answer)
    }
}

/// A real rmcp client of any MCP server at `url` (the broker's, or a tool server's), with the
/// given elicitation capabilities and bearer token.
pub async fn mcp_client_at(
    url: &str,
    token: &str,
    kind: ClientKind,
) -> Result<McpClient, rmcp::service::ClientInitializeError> {
    mcp_client_with_lifecycle(url, token, kind, ClientLifecycleMode::Initialize).await
}

/// [`mcp_client_at`] with the lifecycle of a protocol revision: `Initialize` for a 2025-11-25
/// session, `Discover` for stateless 2026-07-28.
pub async fn mcp_client_with_lifecycle(
    url: &str,
    token: &str,
    kind: ClientKind,
    lifecycle: ClientLifecycleMode,
) -> Result<McpClient, rmcp::service::ClientInitializeError> {
    let (elicit_tx, elicit_rx) = mpsc::unbounded_channel();
    let (done_tx, done_rx) = mpsc::unbounded_channel();
    let (updated_tx, updated_rx) = mpsc::unbounded_channel();
    let progress = Arc::new(tokio::sync::watch::Sender::new(0usize));
    let form_answers = FormAnswers::default();
    let (logs_tx, logs_rx) = mpsc::unbounded_channel();
    let handler = RecordingClient {
        kind,
        elicitations: elicit_tx,
        completions: done_tx,
        updates: updated_tx,
        logs: logs_tx,
        progress: progress.clone(),
        form_answers: form_answers.clone(),
    };
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token),
    );
    let service = handler.serve_with_lifecycle(transport, lifecycle).await?;
    Ok(McpClient {
        service,
        elicitations: Mutex::new(elicit_rx),
        completions: Mutex::new(done_rx),
        updates: Mutex::new(updated_rx),
        logs: Mutex::new(logs_rx),
        progress,
        form_answers,
    })
}

pub fn location(response: &reqwest::Response) -> String {
    response.headers().get("location").expect("a Location header").to_str().unwrap().to_owned()
}

pub fn urlencode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// The value of `<input … name="NAME" … value="VALUE">` in a page.
pub fn hidden_field(html: &str, name: &str) -> Option<String> {
    hidden_fields(html).into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

/// All `<input name=… value=…>` pairs of a page (attribute order-insensitive).
pub fn hidden_fields(html: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for tag in html.split("<input").skip(1) {
        let tag = tag.split('>').next().unwrap_or_default();
        let attr = |attr: &str| {
            let key = format!("{attr}=\"");
            tag.find(&key).map(|i| {
                let rest = &tag[i + key.len()..];
                html_unescape(&rest[..rest.find('"').unwrap_or(rest.len())])
            })
        };
        if let (Some(name), Some(value)) = (attr("name"), attr("value")) {
            out.push((name, value));
        }
    }
    out
}

fn html_unescape(value: &str) -> String {
    value
        .replace("&#x2f;", "/")
        .replace("&#x2F;", "/")
        .replace("&#47;", "/")
        .replace("&quot;", "\"")
        .replace("&#34;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// Declares `elicitation: {form: {}, url: {}}`.
    Url,
    /// Declares `elicitation: {}` (form only).
    FormOnly,
    /// Declares no elicitation capability.
    NoElicitation,
    /// Declares URL mode but declines every elicitation.
    UrlDeclining,
    /// Declares `elicitation: {url: {}}` (URL mode only, no forms).
    #[allow(dead_code, reason = "used by the forms tests")]
    UrlOnly,
    /// Declares URL and form mode, records each elicitation and never answers it (a user who
    /// has the question open).
    #[allow(dead_code, reason = "used by the stop tests")]
    Silent,
}

/// Answers a client gives to form elicitations, in order (see [`McpClient::answer_forms`]).
/// With none queued, a form gets the client kind's usual answer.
#[derive(Clone, Default)]
pub struct FormAnswers(Arc<std::sync::Mutex<VecDeque<ElicitResult>>>);

pub struct McpClient {
    pub service: RunningService<RoleClient, RecordingClient>,
    elicitations: Mutex<mpsc::UnboundedReceiver<ElicitRequestParams>>,
    completions: Mutex<mpsc::UnboundedReceiver<String>>,
    /// URIs of `notifications/resources/updated`.
    updates: Mutex<mpsc::UnboundedReceiver<String>>,
    /// `notifications/message`, as (level, logger, data).
    logs: Mutex<mpsc::UnboundedReceiver<LogMessage>>,
    progress: Arc<tokio::sync::watch::Sender<usize>>,
    #[allow(dead_code, reason = "used by the forms tests")]
    form_answers: FormAnswers,
}

#[allow(dead_code, reason = "used by the forms tests")]
impl McpClient {
    /// Queues answers for the next form elicitations (one each, in order).
    pub fn answer_forms(&self, answers: impl IntoIterator<Item = ElicitResult>) {
        self.form_answers.0.lock().unwrap().extend(answers);
    }

    /// The next `elicitation/create` the server sent, of either mode.
    pub async fn next_elicitation(&self) -> ElicitRequestParams {
        tokio::time::timeout(Duration::from_secs(20), self.elicitations.lock().await.recv())
            .await
            .expect("an elicitation")
            .unwrap()
    }

    /// The next form elicitation: its message and `requestedSchema` as JSON.
    pub async fn next_form_elicitation(&self) -> (String, serde_json::Value) {
        match self.next_elicitation().await {
            ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } => {
                (message, serde_json::to_value(requested_schema).unwrap())
            }
            other => panic!("expected a form elicitation, got {other:?}"),
        }
    }

    /// Every elicitation received and not yet taken.
    pub async fn drain_elicitations(&self) -> Vec<ElicitRequestParams> {
        let mut receiver = self.elicitations.lock().await;
        std::iter::from_fn(|| receiver.try_recv().ok()).collect()
    }
}

impl McpClient {
    /// Waits (at most `wait`) until this client has received `count` progress notifications.
    pub async fn wait_for_progress(&self, count: usize, wait: Duration) -> bool {
        let mut seen = self.progress.subscribe();
        tokio::time::timeout(wait, seen.wait_for(|n| *n >= count)).await.is_ok_and(|r| r.is_ok())
    }

    pub fn peer(&self) -> &rmcp::Peer<RoleClient> {
        self.service.peer()
    }

    /// The next `elicitation/create` the server sent (URL mode).
    pub async fn next_url_elicitation(&self) -> (String, String) {
        let request = tokio::time::timeout(Duration::from_secs(20), self.elicitations.lock().await.recv())
            .await
            .expect("an elicitation")
            .unwrap();
        match request {
            ElicitRequestParams::UrlElicitationParams { url, elicitation_id, .. } => (url, elicitation_id),
            other => panic!("expected a URL elicitation, got {other:?}"),
        }
    }

    pub async fn no_elicitation_was_sent(&self) -> bool {
        self.elicitations.lock().await.try_recv().is_err()
    }

    /// The URI of the next `notifications/resources/updated`.
    pub async fn next_resource_update(&self, wait: Duration) -> Option<String> {
        tokio::time::timeout(wait, self.updates.lock().await.recv()).await.ok().flatten()
    }

    /// The next `notifications/message` received.
    pub async fn next_log(&self, wait: Duration) -> Option<LogMessage> {
        tokio::time::timeout(wait, self.logs.lock().await.recv()).await.ok().flatten()
    }

    /// The next `notifications/elicitation/complete` id.
    pub async fn next_completion(&self, wait: Duration) -> Option<String> {
        tokio::time::timeout(wait, self.completions.lock().await.recv()).await.ok().flatten()
    }

    pub async fn call(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<rmcp::model::CallToolResult, rmcp::ServiceError> {
        let mut params = rmcp::model::CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments.as_object().cloned();
        // The service's `call_tool` (not the peer's) drives MCP 2026-07-28 `InputRequiredResult`
        // rounds through this client's handler; a 2025-11-25 session never gets one.
        self.service.call_tool(params).await
    }

    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// A `notifications/message` a test client received: its level (as sent), logger and data.
pub type LogMessage = (String, Option<String>, serde_json::Value);

pub struct RecordingClient {
    kind: ClientKind,
    elicitations: mpsc::UnboundedSender<ElicitRequestParams>,
    completions: mpsc::UnboundedSender<String>,
    updates: mpsc::UnboundedSender<String>,
    logs: mpsc::UnboundedSender<LogMessage>,
    progress: Arc<tokio::sync::watch::Sender<usize>>,
    form_answers: FormAnswers,
}

impl ClientHandler for RecordingClient {
    #[allow(deprecated, reason = "notifications/message is what the servers under test send")]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        let level = serde_json::to_value(params.level).unwrap().as_str().unwrap_or_default().to_owned();
        let _ = self.logs.send((level, params.logger, params.data));
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        let _ = self.updates.send(params.uri);
    }

    async fn on_progress(
        &self,
        _params: rmcp::model::ProgressNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        self.progress.send_modify(|n| *n += 1);
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = match self.kind {
            ClientKind::Url | ClientKind::UrlDeclining | ClientKind::Silent => Some(
                ElicitationCapability::new()
                    .with_form(FormElicitationCapability::default())
                    .with_url(UrlElicitationCapability::default()),
            ),
            ClientKind::FormOnly => Some(ElicitationCapability::new()),
            ClientKind::UrlOnly => Some(ElicitationCapability::new().with_url(UrlElicitationCapability::default())),
            ClientKind::NoElicitation => None,
        };
        ClientConfig::new(capabilities, Implementation::new("test-client", "1.0.0"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let queued = match &request {
            ElicitRequestParams::FormElicitationParams { .. } => self.form_answers.0.lock().unwrap().pop_front(),
            _ => None,
        };
        let _ = self.elicitations.send(request);
        if let Some(answer) = queued {
            return Ok(answer);
        }
        if self.kind == ClientKind::Silent {
            return std::future::pending().await;
        }
        Ok(ElicitResult::new(if self.kind == ClientKind::UrlDeclining {
            ElicitationAction::Decline
        } else {
            ElicitationAction::Accept
        }))
    }

    async fn on_custom_notification(&self, notification: CustomNotification, _ctx: NotificationContext<RoleClient>) {
        if notification.method == "notifications/elicitation/complete"
            && let Some(id) = notification.params.as_ref().and_then(|p| p.get("elicitationId")).and_then(|v| v.as_str())
        {
            let _ = self.completions.send(id.to_owned());
        }
    }
}

/// An empty database (nothing migrated), for tests of the migrations themselves.
#[allow(dead_code, reason = "used by the forms tests")]
pub struct EmptyDatabase {
    pub url: String,
    _dir: tempfile::TempDir,
    postgres: Option<PostgresDb>,
}

#[allow(dead_code, reason = "used by the forms tests")]
impl EmptyDatabase {
    /// `None` when PostgreSQL is unreachable (printing `SKIPPED postgres: …`, see `on_both_backends`).
    pub async fn create(backend: Backend) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        match backend {
            Backend::Sqlite => {
                let url = format!("sqlite://{}/empty.db?mode=rwc", dir.path().display());
                Some(Self { url, _dir: dir, postgres: None })
            }
            Backend::Postgres => {
                let db = PostgresDb::create().await?;
                Some(Self { url: db.url.clone(), _dir: dir, postgres: Some(db) })
            }
        }
    }

    pub async fn drop_now(mut self) {
        if let Some(db) = self.postgres.take() {
            db.drop_database().await;
        }
    }
}

/// A fresh PostgreSQL database per test, dropped at the end.
struct PostgresDb {
    admin_url: String,
    name: String,
    url: String,
}

impl PostgresDb {
    async fn create() -> Option<Self> {
        use sqlx::Connection;
        let admin_url =
            std::env::var("TEST_POSTGRES_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let required = std::env::var("REQUIRE_POSTGRES").is_ok_and(|v| v == "1");
        let mut conn = match sqlx::PgConnection::connect(&admin_url).await {
            Ok(conn) => conn,
            Err(error) => {
                if required {
                    panic!("REQUIRE_POSTGRES=1 but PostgreSQL at {admin_url} is unreachable: {error}");
                }
                eprintln!("SKIPPED postgres: cannot connect to {admin_url}: {error}");
                return None;
            }
        };
        let name = format!("oauth_broker_test_{}", uuid::Uuid::new_v4().simple());
        sqlx::Executor::execute(&mut conn, format!("CREATE DATABASE {name}").as_str()).await.unwrap();
        let mut url = url::Url::parse(&admin_url).unwrap();
        url.set_path(&format!("/{name}"));
        Some(Self { admin_url, name, url: url.to_string() })
    }

    async fn drop_database(self) {
        use sqlx::Connection;
        if let Ok(mut conn) = sqlx::PgConnection::connect(&self.admin_url).await {
            let _ = sqlx::Executor::execute(
                &mut conn,
                format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name).as_str(),
            )
            .await;
        }
    }
}

impl TestApp {
    /// A URL-mode client for `name` whose demo account is connected (via -32042 and the
    /// browser flow).
    pub async fn connected_client(&self, name: &str) -> McpClient {
        let client = self.mcp_client(name, ClientKind::Url).await;
        let error = match client
            .call("provider_request", serde_json::json!({"provider": "demo", "method": "GET", "path": "/me"}))
            .await
        {
            Err(rmcp::ServiceError::McpError(e)) => e,
            other => panic!("expected -32042, got {other:?}"),
        };
        let url = error.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned();
        let browser = self.browser();
        assert_eq!(self.approve_in_browser(&browser, &url, name).await.status(), 200);
        client
    }
}

/// What a check given to [`eventually`] reports: whether the awaited event has happened yet,
/// and what it brings.
///
/// `true`, `Some(value)` and `Ok(value)` say it has; `false`, `None` and `Err(seen)` say not yet,
/// an `Err` naming what the check saw instead, for the failure message.
pub trait Observed {
    /// What `eventually` returns once the event happened.
    type Value;
    /// The value once the event happened; otherwise what was seen instead, if the check said.
    fn settled(self) -> Result<Self::Value, Option<String>>;
}

impl Observed for bool {
    type Value = ();
    fn settled(self) -> Result<(), Option<String>> {
        if self { Ok(()) } else { Err(None) }
    }
}

impl<T> Observed for Option<T> {
    type Value = T;
    fn settled(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

impl<T, E: std::fmt::Display> Observed for Result<T, E> {
    type Value = T;
    fn settled(self) -> Result<T, Option<String>> {
        self.map_err(|seen| Some(seen.to_string()))
    }
}

/// How often [`eventually`] looks again: the wait ends on the event itself, so this only bounds
/// how late the test notices it.
const POLL_EVERY: Duration = Duration::from_millis(10);

/// Waits for an event the test cannot be told of directly — a server up, a row changed, a
/// counter moved, a change made by another process reaching a server's caches (issue 11) —
/// by asking `check` until it reports the event, and returns what it reported (see
/// [`Observed`]). Tests wait for events this way, never for a fixed time: a passing test waits
/// only as long as the event takes, and `within` is a bound for a broken one, generous because
/// the machine may be loaded. When `within` passes first it panics with `what` (the event, as a
/// sentence) and the last thing the check saw.
pub async fn eventually<F, Fut>(what: &str, within: Duration, mut check: F) -> <Fut::Output as Observed>::Value
where
    F: FnMut() -> Fut,
    Fut: std::future::Future,
    Fut::Output: Observed,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let seen = match check().await.settled() {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        if tokio::time::Instant::now() >= deadline {
            match seen {
                Some(seen) => panic!("not within {within:?}: {what} (last seen: {seen})"),
                None => panic!("not within {within:?}: {what}"),
            }
        }
        // The pace of looking again (see POLL_EVERY), not a wait for an outcome.
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// The broker's binary. `OAUTH_BROKER_TEST_BIN` names a copy when several worktrees share one
/// target directory (another build may replace the shared binary between build and test).
pub fn binary() -> String {
    std::env::var("OAUTH_BROKER_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_oauth-broker").to_owned())
}
