//! A database that stops answering gives callers a retryable error within the configured bound
//! (`database_timeout`), never a wait as long as the database's silence (issue 14, finding 3).

use sqlx::Connection;

use crate::helpers::db_proxy::{DbProxy, Mode, postgres_upstream};
use crate::helpers::{ALICE, Backend, ClientKind, SpawnOptions, TestApp, spawn_app_opts};

async fn spawn_behind_proxy() -> Option<(TestApp, DbProxy)> {
    let proxy = DbProxy::start(postgres_upstream()).await;
    let options = proxy.spawn_options("database_timeout = \"1s\"\n");
    let app = spawn_app_opts(Backend::Postgres, options, |b| b).await?;
    Some((app, proxy))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_database_connection_gives_a_retryable_error_not_a_hang() {
    let Some((app, proxy)) = spawn_behind_proxy().await else { return };
    let user = app.user_id(ALICE).await;
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    assert!(client.call("list_connections", serde_json::json!({})).await.is_ok());

    // Arrange: the network path to the database goes silent (no reset, no answer).
    proxy.set(Mode::Freeze);

    // Act / Assert: the store says "unavailable" (retryable) instead of waiting on the socket,
    // and a tool call ends with an error instead of being kept alive.
    let error = app.state.core.store.grants().for_user(&user).await.expect_err("the database is frozen");
    assert!(error.is_unavailable(), "{error}");
    let listed = client.call("list_connections", serde_json::json!({})).await;
    assert!(listed.is_err() || listed.as_ref().is_ok_and(|r| r.is_error == Some(true)), "{listed:?}");

    // Once the path thaws, calls work again without a restart.
    proxy.set(Mode::Forward);
    crate::helpers::eventually("the store recovers", std::time::Duration::from_secs(10), || async {
        app.state.core.store.grants().for_user(&user).await.is_ok()
    })
    .await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_lock_held_by_someone_else_gives_a_retryable_error_within_the_bound() {
    let options = SpawnOptions { toml: "database_timeout = \"1s\"\n".into(), ..Default::default() };
    let Some(app) = spawn_app_opts(Backend::Postgres, options, |b| b).await else { return };
    let user = app.user_id(ALICE).await;

    // Arrange: another session holds a lock on the grants table and does not let go.
    let mut other = sqlx::PgConnection::connect(&app.database_url).await.unwrap();
    sqlx::Executor::execute(&mut other, "BEGIN").await.unwrap();
    sqlx::Executor::execute(&mut other, "LOCK TABLE grants IN ACCESS EXCLUSIVE MODE").await.unwrap();

    // Act / Assert: the read gives up (PostgreSQL's lock_timeout) with a retryable error.
    let error = app.state.core.store.grants().for_user(&user).await.expect_err("the table is locked");
    assert!(error.is_unavailable(), "{error}");

    sqlx::Executor::execute(&mut other, "ROLLBACK").await.unwrap();
    assert!(app.state.core.store.grants().for_user(&user).await.is_ok(), "works again once the lock is gone");
    drop(other);
    app.stop().await;
}

// A hosted page whose database is away says so, as the token API does: 503 with Retry-After
// and "try again", not a 500 that reads as a bug and makes the operator's log say error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosted_page_whose_database_is_away_answers_503_with_retry_after() {
    let Some((app, proxy)) = spawn_behind_proxy().await else { return };
    let browser = app.browser();
    let login = browser.get(app.url("/login")).send().await.unwrap().text().await.unwrap();
    let csrf = crate::helpers::hidden_field(&login, "csrf_token").unwrap();
    let form = [("username", ALICE), ("password", "a-wrong-password"), ("next", "/"), ("csrf_token", csrf.as_str())];

    proxy.set(Mode::Cut);
    let answer = browser.post(app.url("/login")).form(&form).send().await.unwrap();
    assert_eq!(answer.status(), 503);
    assert_eq!(answer.headers()["retry-after"], "5");
    let page = answer.text().await.unwrap();
    assert!(page.contains("Temporarily unavailable") && page.contains("Try again in 5 seconds"), "{page}");
    assert!(!page.contains("127.0.0.1") && !page.contains("pool"), "no error text on the page: {page}");

    // Back again: the same form is answered as ever (a wrong password is refused).
    proxy.set(Mode::Forward);
    let status = crate::helpers::eventually("the page answers again", std::time::Duration::from_secs(10), || async {
        let status = browser.post(app.url("/login")).form(&form).send().await.unwrap().status();
        (status != 503).then_some(status)
    })
    .await;
    assert_eq!(status, 401);
    app.stop().await;
}
