//! Faults during a refresh never cost the user their connection (issue 14): a provider that
//! rotates refresh tokens (and refuses a spent one) behind the broker, and the faults around it
//! — a database cut at the commit, a holder killed mid-refresh, a caller that goes away, many
//! callers on one or two instances at once.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceError;

use oauth_broker::store::grants::GrantStatus;

use crate::helpers::db_proxy::{DbProxy, Mode, postgres_upstream};
use crate::helpers::strict_provider::{StrictProvider, connect_strict, me, spawn, status_of};
use crate::helpers::{ALICE, Backend, ClientKind, McpClient, SpawnOptions, TestApp, spawn_app_opts};

fn wall_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

async fn strict_grant(app: &TestApp) -> oauth_broker::store::grants::GrantRow {
    app.state.core.store.grants().latest(&app.user_id(ALICE).await, "strict", None).await.unwrap().unwrap()
}

// ---- 50 concurrent calls on a 30-second token: one refresh ----

async fn fifty_concurrent_calls_on_a_30_second_token_refresh_it_once(backend: Backend) {
    let provider = StrictProvider::start(Duration::from_secs(30)).await;
    let Some(app) = spawn(backend, &provider, "").await else { return };
    let client = Arc::new(connect_strict(&app).await);

    // Arrange: the 30-second token has expired.
    app.clock.advance(31);
    // Act: 50 calls at once.
    let calls: Vec<_> = (0..50)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { me(&client).await })
        })
        .collect();
    // Assert: every call succeeds, and the provider saw one refresh (a fixed 60 s margin made
    // the new 30 s token stale at once: every waiter refreshed again).
    for call in calls {
        assert_eq!(status_of(&call.await.unwrap().unwrap()), 200);
    }
    assert_eq!(provider.refresh_requests(), 1, "exactly one refresh");
    assert_eq!(provider.invalid_grants(), 0);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_calls_on_a_30_second_token_refresh_it_once_sqlite() {
    fifty_concurrent_calls_on_a_30_second_token_refresh_it_once(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_calls_on_a_30_second_token_refresh_it_once_postgres() {
    fifty_concurrent_calls_on_a_30_second_token_refresh_it_once(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_calls_on_two_instances_sharing_postgres_refresh_once() {
    let provider = StrictProvider::start(Duration::from_secs(30)).await;
    let Some(first) = spawn(Backend::Postgres, &provider, "").await else { return };
    let options = SpawnOptions { toml: provider.toml(), instance_of: Some(first.instance()), ..Default::default() };
    let second = spawn_app_opts(Backend::Postgres, options, |b| b).await.unwrap();
    let on_first = Arc::new(connect_strict(&first).await);
    let token = first.token_for(ALICE).await;
    let on_second = Arc::new(crate::helpers::mcp_client_at(&second.mcp_url(), &token, ClientKind::Url).await.unwrap());

    // Both instances' clocks pass the token's expiry.
    first.clock.advance(31);
    second.clock.advance(31);
    let calls: Vec<_> = (0..50)
        .map(|i| {
            let client = if i % 2 == 0 { on_first.clone() } else { on_second.clone() };
            tokio::spawn(async move { me(&client).await })
        })
        .collect();
    for call in calls {
        assert_eq!(status_of(&call.await.unwrap().unwrap()), 200);
    }
    assert_eq!(provider.refresh_requests(), 1, "one refresh across both instances");
    assert_eq!(provider.invalid_grants(), 0);
    second.stop().await;
    first.stop().await;
}

// ---- a caller that goes away does not take the refresh with it ----

async fn a_refresh_whose_caller_went_away_still_stores_the_rotated_token(backend: Backend) {
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    let Some(app) = spawn(backend, &provider, "").await else { return };
    let client = Arc::new(connect_strict(&app).await);
    let before = strict_grant(&app).await;

    // Arrange: the provider holds the refresh answer while the caller — here the core's access
    // decision itself, so its future is certainly dropped — goes away.
    app.clock.advance(2 * 3600);
    provider.hold_next_refresh();
    let caller = tokio::spawn({
        let state = app.state.clone();
        let user = app.user_id(ALICE).await;
        async move {
            let provider = state.core.providers.find("strict").unwrap().clone();
            let client = oauth_broker::identity::ClientIdentity::IssuedToken(None);
            let required = oauth_broker::domain::Scopes::default();
            let _ =
                oauth_broker::broker::access::standing(&state.core, &user, &client, &provider, None, &required, None)
                    .await;
        }
    });
    provider.wait_until_held().await;
    caller.abort();
    assert!(caller.await.unwrap_err().is_cancelled(), "the caller is gone");
    // Act: the provider answers (and rotates) after the caller is gone.
    provider.release();
    app.state.core.refresh_locks.wait_idle().await;

    // Assert: the rotated token was stored; the next call uses it without refreshing again.
    let after = strict_grant(&app).await;
    assert_ne!(after.refresh_token_sealed, before.refresh_token_sealed, "the rotated refresh token is stored");
    assert_eq!(after.status, GrantStatus::Active);
    assert_eq!(status_of(&me(&client).await.unwrap()), 200);
    assert_eq!(provider.refresh_requests(), 1);
    assert_eq!(provider.invalid_grants(), 0);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_whose_caller_went_away_still_stores_the_rotated_token_sqlite() {
    a_refresh_whose_caller_went_away_still_stores_the_rotated_token(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_whose_caller_went_away_still_stores_the_rotated_token_postgres() {
    a_refresh_whose_caller_went_away_still_stores_the_rotated_token(Backend::Postgres).await;
}

// ---- a database outage at the commit ----

/// The app on PostgreSQL through a proxy the test controls, with the strict provider.
async fn spawn_behind_proxy(provider: &StrictProvider, toml: &str) -> Option<(TestApp, DbProxy)> {
    let proxy = DbProxy::start(postgres_upstream()).await;
    let proxied = proxy.url_for("postgres://postgres@127.0.0.1:5432/x");
    let options = SpawnOptions {
        toml: format!("{toml}\n{}", provider.toml()),
        database_url: Some(Box::new(move |url: &str| {
            let mut target = url::Url::parse(url).unwrap();
            let via = url::Url::parse(&proxied).unwrap();
            target.set_host(via.host_str()).unwrap();
            target.set_port(via.port()).unwrap();
            target.to_string()
        })),
        ..Default::default()
    };
    let app = spawn_app_opts(Backend::Postgres, options, |b| b).await?;
    Some((app, proxy))
}

/// Cuts the database the moment the provider has the refresh request, lets the provider answer
/// (rotating the refresh token), keeps the database away for 12 s, restores it.
async fn refresh_across_a_12_second_database_cut(
    app: &TestApp,
    provider: &StrictProvider,
    proxy: &DbProxy,
    client: &Arc<McpClient>,
) -> Result<rmcp::model::CallToolResult, ServiceError> {
    app.clock.advance(2 * 3600);
    provider.hold_next_refresh();
    let call = tokio::spawn({
        let client = client.clone();
        async move { me(&client).await }
    });
    provider.wait_until_held().await;
    proxy.set(Mode::Cut);
    provider.release();
    // The outage itself: its length is the fault under test, not a wait for an event.
    tokio::time::sleep(Duration::from_secs(12)).await;
    proxy.set(Mode::Forward);
    call.await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_12_second_database_cut_at_the_refresh_commit_costs_no_consent() {
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    let Some((app, proxy)) = spawn_behind_proxy(&provider, "").await else { return };
    let client = Arc::new(connect_strict(&app).await);

    // Act: the commit retries through the outage (default budget: 3 × 5 s).
    let answer = refresh_across_a_12_second_database_cut(&app, &provider, &proxy, &client).await;

    // Assert: the call itself succeeded, the rotated token is stored, nothing was redeemed twice.
    assert_eq!(status_of(&answer.unwrap()), 200, "the call succeeds once the database is back");
    assert_eq!(strict_grant(&app).await.status, GrantStatus::Active);
    assert_eq!(status_of(&me(&client).await.unwrap()), 200, "the next call needs no new consent");
    assert_eq!((provider.refresh_requests(), provider.invalid_grants()), (1, 0));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_tokens_that_outlast_the_commit_budget_are_stored_by_the_next_call() {
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    // A 1 s call bound makes the commit budget 3 s, shorter than the 12 s outage.
    let Some((app, proxy)) = spawn_behind_proxy(&provider, "database_timeout = \"1s\"").await else { return };
    let client = Arc::new(connect_strict(&app).await);

    let answer = refresh_across_a_12_second_database_cut(&app, &provider, &proxy, &client).await;
    assert!(
        answer.is_err() || answer.as_ref().is_ok_and(|r| r.is_error == Some(true)),
        "the first call could not store the tokens: {answer:?}"
    );
    assert_eq!(app.state.core.refresh_locks.pending_count(), 1, "the rotated tokens are kept (sealed) in memory");

    // Act: the next call stores them before anything else, instead of redeeming the spent token.
    assert_eq!(status_of(&me(&client).await.unwrap()), 200, "no new consent needed");
    assert_eq!(app.state.core.refresh_locks.pending_count(), 0);
    assert_eq!(strict_grant(&app).await.status, GrantStatus::Active);
    assert_eq!(
        (provider.refresh_requests(), provider.invalid_grants()),
        (1, 0),
        "the spent token was never sent again"
    );
    app.stop().await;
}

// ---- a holder killed mid-refresh ----

/// A second server process (the real binary) on `first`'s database, its refresh of alice's
/// expired grant held at the provider: what a stop signal meets mid-refresh.
struct MidRefresh {
    second: std::process::Child,
    client: McpClient,
    user: String,
    /// The call on the second process that started the refresh.
    call: tokio::task::JoinHandle<Result<rmcp::model::CallToolResult, ServiceError>>,
}

async fn second_process_mid_refresh(first: &TestApp, provider: &StrictProvider, log: &str) -> MidRefresh {
    let client = connect_strict(first).await;
    let user = first.user_id(ALICE).await;
    // Arrange: a second process — the real binary — on the same database, with the grant expired
    // by the wall clock it uses.
    let config_dir = tempfile::tempdir().unwrap();
    let config_file = config_dir.path().join("broker.toml");
    std::fs::write(&config_file, provider.toml()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let instance = first.instance();
    let second = std::process::Command::new(crate::helpers::binary())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("OAUTH_BROKER_ENCRYPTION_KEY", secrecy::ExposeSecret::expose_secret(&instance.encryption_key))
        .env("OAUTH_BROKER_LOG", log)
        // Read by a test that waits for a line; left to the terminal otherwise.
        .stderr(if log == "info" { std::process::Stdio::piped() } else { std::process::Stdio::inherit() })
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--public-url", &instance.public_url])
        .args(["--database-url", &instance.database_url, "--data-dir"])
        .arg(config_dir.path())
        .arg("--config")
        .arg(&config_file)
        .spawn()
        .unwrap();
    sqlx::query("UPDATE grants SET expires_at = $1 WHERE user_id = $2 AND provider = 'strict'")
        .bind(wall_now() - 10)
        .bind(&user)
        .execute(first.state.core.store.pool())
        .await
        .unwrap();
    let second_mcp = format!("http://127.0.0.1:{port}/mcp");
    let token = first.token_for(ALICE).await;
    let on_second = crate::helpers::eventually("the second process serves /mcp", Duration::from_secs(30), || async {
        crate::helpers::mcp_client_at(&second_mcp, &token, ClientKind::Url).await
    })
    .await;
    let on_second = Arc::new(on_second);

    provider.hold_next_refresh();
    let mut call = tokio::spawn({
        let client = on_second.clone();
        async move { me(&client).await }
    });
    tokio::select! {
        _ = provider.wait_until_held() => {}
        answer = &mut call => panic!("the second process answered without refreshing: {answer:?}"),
    }
    // The config directory must outlive the process (it reads nothing more after start-up).
    std::mem::forget(config_dir);
    MidRefresh { second, client, user, call }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_left_by_a_killed_process_is_taken_over_once_its_short_lease_lapses() {
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    let Some(first) = spawn(Backend::Postgres, &provider, "").await else { return };
    let MidRefresh { second: mut killed, client, user, call: _doomed } =
        second_process_mid_refresh(&first, &provider, "warn").await;

    // Act: the process is killed (SIGKILL: nothing of it runs again).
    killed.kill().unwrap();
    killed.wait().unwrap();
    let (lease_until, holder): (Option<i64>, Option<String>) = sqlx::query_as(
        "SELECT refresh_lease_until, refresh_lease_holder FROM grants WHERE user_id = $1 AND provider = 'strict'",
    )
    .bind(&user)
    .fetch_one(first.state.core.store.pool())
    .await
    .unwrap();
    let lease_until = lease_until.expect("the killed process left its lease");
    assert_ne!(holder.as_deref(), Some(first.state.core.refresh_locks.holder()), "held by the other process");

    // Assert: the lease lapses at most `refresh_lease` (10 s) after its holder last renewed it
    // (it was 45 s and unrenewable before), and once it has, the next call takes it over and
    // refreshes with the token the provider never processed: no new consent.
    assert!(lease_until <= wall_now() + 10, "lease until {lease_until}, now {}", wall_now());
    first.clock.advance(lease_until - first.now() + 1);
    assert_eq!(status_of(&me(&client).await.unwrap()), 200, "the next call succeeds");
    let grant = strict_grant(&first).await;
    assert_eq!(grant.status, GrantStatus::Active);
    assert_eq!(provider.refreshes_answered(), 1);
    assert_eq!(provider.invalid_grants(), 0);
    first.stop().await;
}

// ---- a stop signal mid-refresh ----

// Issue 14, finding 1: SIGTERM during a refresh at a provider that rotates refresh tokens
// dropped the new tokens and left the lease claimed, so after the restart the next call waited
// on the lease and then refreshed with the spent token: invalid_grant, new consent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_refresh_stores_the_rotated_tokens_before_the_process_exits() {
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    let Some(first) = spawn(Backend::Postgres, &provider, "").await else { return };
    let MidRefresh { mut second, client, user, call } = second_process_mid_refresh(&first, &provider, "info").await;

    // Act: the caller goes away (so no open request keeps the process up), the deploy stops the
    // process while the provider is still answering, and only once the process has closed every
    // connection does the provider answer (with a rotated refresh token).
    call.abort();
    let _ = call.await;
    let signalled = std::process::Command::new("kill").args(["-TERM", &second.id().to_string()]).status().unwrap();
    assert!(signalled.success());
    let stderr = std::io::BufReader::new(second.stderr.take().unwrap());
    let (said, heard) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut said = Some(said);
        // Tells when the process says it waits for the refresh (or ends without saying so),
        // and keeps reading so its later lines never meet a closed pipe.
        for line in stderr.lines().map_while(Result::ok) {
            if line.contains("waiting for running token refreshes")
                && let Some(said) = said.take()
            {
                let _ = said.send(true);
            }
        }
        if let Some(said) = said.take() {
            let _ = said.send(false);
        }
    });
    let waited = heard.await.unwrap();
    provider.release();
    let exit = tokio::task::spawn_blocking(move || second.wait().unwrap()).await.unwrap();

    // Assert: the process waited for the refresh and exited cleanly, the rotated tokens are
    // stored and the lease is given back.
    assert!(waited, "the process exited without waiting for the refresh at the provider");
    assert!(exit.success(), "exit status {exit:?}");
    let (lease_until, holder): (Option<i64>, Option<String>) = sqlx::query_as(
        "SELECT refresh_lease_until, refresh_lease_holder FROM grants WHERE user_id = $1 AND provider = 'strict'",
    )
    .bind(&user)
    .fetch_one(first.state.core.store.pool())
    .await
    .unwrap();
    assert_eq!((lease_until, holder), (None, None), "no lease left for others to wait on");
    assert_eq!(provider.refreshes_answered(), 1);
    // The next call (another instance, as after a restart) uses the stored tokens: no second
    // refresh, no invalid_grant, no new consent.
    assert_eq!(status_of(&me(&client).await.unwrap()), 200);
    assert_eq!(strict_grant(&first).await.status, GrantStatus::Active);
    assert_eq!(provider.refresh_requests(), 1, "the rotated token was stored, so nothing was refreshed again");
    assert_eq!(provider.invalid_grants(), 0);
    first.stop().await;
}
