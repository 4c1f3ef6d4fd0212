//! Faults that must not cost a user their connection (issue 14): a database that is away for a
//! moment answers "try again" instead of `-32603`; a code exchange interrupted by a stopped
//! process ends cleanly and the reloaded callback says to start again.

use std::time::Duration;

use rmcp::ServiceError;
use serde_json::json;
use sqlx::Connection;

use oauth_broker::broker::flow::{self, EXCHANGE_TIMEOUT_SECONDS};
use oauth_broker::crypto::sha256_hex;
use oauth_broker::store::Backend;
use oauth_broker::store::authorizations::AuthorizationStatus;

use crate::helpers::{ALICE, ClientKind, McpClient, TestApp, hidden_field, location};
use crate::on_both_backends;

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n")
}

async fn me(client: &McpClient) -> Result<rmcp::model::CallToolResult, ServiceError> {
    client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await
}

/// Blocks the broker's writes to `authorizations` until dropped: SQLite's one writer lock, or
/// a PostgreSQL table lock whose waiting broker connection the test then cuts.
enum Blocker {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

impl Blocker {
    async fn hold(app: &TestApp) -> Self {
        let url = &app.state.core.config.database_url;
        match app.state.core.store.backend() {
            Backend::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
                sqlx::query("BEGIN EXCLUSIVE").execute(&mut conn).await.unwrap();
                Blocker::Sqlite(conn)
            }
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::query("BEGIN").execute(&mut conn).await.unwrap();
                sqlx::query("LOCK TABLE authorizations IN ACCESS EXCLUSIVE MODE").execute(&mut conn).await.unwrap();
                Blocker::Postgres(conn)
            }
        }
    }

    /// PostgreSQL: waits until a broker connection queues behind the lock, then terminates it
    /// (as a failover or a cut network would), unless the broker gave up on its own first (its
    /// `lock_timeout`): either way the database was away for that call. SQLite needs nothing:
    /// the writer gives up after its busy timeout.
    async fn cut_the_waiting_connection(&mut self, call: &tokio::task::JoinHandle<impl Sized>) {
        let Blocker::Postgres(conn) = self else { return };
        let conn = tokio::sync::Mutex::new(conn);
        // The waiting connection's pid, or none if the call finished without waiting.
        let waiting = crate::helpers::eventually("the broker waits on the lock", Duration::from_secs(20), || async {
            let waiting: Option<i32> = sqlx::query_scalar(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
                 AND wait_event_type = 'Lock' AND pid <> pg_backend_pid() LIMIT 1",
            )
            .fetch_optional(&mut **conn.lock().await)
            .await
            .unwrap();
            match waiting {
                Some(pid) => Some(Some(pid)),
                None if call.is_finished() => Some(None),
                None => None,
            }
        })
        .await;
        if let Some(pid) = waiting {
            let conn = conn.into_inner();
            sqlx::query("SELECT pg_terminate_backend($1)").bind(pid).execute(&mut *conn).await.unwrap();
        }
    }

    async fn release(self) {
        match self {
            Blocker::Sqlite(mut conn) => sqlx::query("ROLLBACK").execute(&mut conn).await.map(drop).unwrap(),
            Blocker::Postgres(mut conn) => sqlx::query("ROLLBACK").execute(&mut conn).await.map(drop).unwrap(),
        }
    }
}

async fn a_tool_call_during_a_database_outage_says_when_to_retry(app: &TestApp) {
    // Arrange: an authenticated session, then the database stops taking writes.
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let mut blocker = Blocker::hold(app).await;

    // Act: a call that must record an authorization.
    let call = tokio::spawn({
        let peer = client.peer().clone();
        async move {
            let mut params = rmcp::model::CallToolRequestParams::new("provider_request");
            params.arguments = json!({"provider": "demo", "method": "GET", "path": "/me"}).as_object().cloned();
            peer.call_tool(params).await
        }
    });
    blocker.cut_the_waiting_connection(&call).await;
    let answer = call.await.unwrap();

    // Assert: a tool result the model can act on, not -32603.
    let result = answer.expect("a tool result, not a JSON-RPC error");
    assert_eq!(result.is_error, Some(true));
    assert_eq!(
        result.structured_content,
        Some(json!({"error": "temporarily_unavailable", "retryAfter": 5})),
        "{}",
        text_of(&result)
    );
    assert!(text_of(&result).contains("Try again in 5 seconds"), "{}", text_of(&result));

    // Once the database is back, the same call goes on as usual.
    blocker.release().await;
    match me(&client).await {
        Err(ServiceError::McpError(e)) => assert_eq!(e.code.0, -32042, "{e:?}"),
        other => panic!("expected -32042 after the outage, got {other:?}"),
    }
}
on_both_backends!(database_outage_in_a_tool, a_tool_call_during_a_database_outage_says_when_to_retry);

/// Approves `connect_url` at the broker and the demo provider, stopping before the callback:
/// returns the callback URL the provider sends the browser to.
async fn callback_url_for(app: &TestApp, browser: &reqwest::Client, connect_url: &str) -> String {
    let path = connect_url.strip_prefix(&app.address).unwrap();
    if browser.get(connect_url).send().await.unwrap().status() == 303 {
        assert_eq!(app.sign_in(browser, ALICE, path).await.status(), 303);
    }
    let html = browser.get(connect_url).send().await.unwrap().text().await.unwrap();
    let csrf = hidden_field(&html, "csrf_token").expect("consent form");
    let approved =
        browser.post(connect_url).form(&[("csrf_token", csrf.as_str()), ("action", "approve")]).send().await.unwrap();
    assert_eq!(approved.status(), 303);
    app.demo_provider_redirect(browser, &location(&approved), "demo-user", "approve").await
}

/// The page a browser ends on (following our own redirects, if the callback uses one).
async fn page_text(browser: &reqwest::Client, app: &TestApp, url: &str) -> (u16, String) {
    let mut response = browser.get(url).send().await.unwrap();
    for _ in 0..3 {
        if !response.status().is_redirection() {
            break;
        }
        let next = location(&response);
        let next = if next.starts_with('/') { app.url(&next) } else { next };
        response = browser.get(next).send().await.unwrap();
    }
    (response.status().as_u16(), response.text().await.unwrap())
}

fn state_of(callback_url: &str) -> String {
    let url = url::Url::parse(callback_url).unwrap();
    url.query_pairs().find(|(k, _)| k == "state").map(|(_, v)| v.into_owned()).expect("a state")
}

async fn a_callback_reloaded_after_an_interrupted_exchange_says_to_start_again(app: &TestApp) {
    // Arrange: the user approved; the process that took the callback consumed the state and
    // was killed during the code exchange, leaving the row `exchanging`.
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let error = match me(&client).await {
        Err(ServiceError::McpError(e)) => e,
        other => panic!("expected -32042, got {other:?}"),
    };
    let elicitation = &error.data.unwrap()["elicitations"][0];
    let (url, id) = (elicitation["url"].as_str().unwrap().to_owned(), elicitation["elicitationId"].as_str().unwrap());
    let browser = app.browser();
    let callback = callback_url_for(app, &browser, &url).await;
    assert!(
        app.state
            .core
            .store
            .authorizations()
            .consume_state(id, &sha256_hex(&state_of(&callback)), app.now())
            .await
            .unwrap()
    );

    // While an exchange could still be running, a reload does not start a second one.
    let (status, page) = page_text(&browser, app, &callback).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Connecting"), "the result page says the exchange is running: {page}");
    assert_eq!(
        app.state.core.store.authorizations().by_id(id).await.unwrap().unwrap().status,
        AuthorizationStatus::Exchanging
    );

    // Act: the user reloads the callback after any exchange would have ended.
    app.clock.advance(EXCHANGE_TIMEOUT_SECONDS + 1);
    let (status, page) = page_text(&browser, app, &callback).await;

    // Assert: the page says to start again from the client; the row is settled.
    assert_eq!(status, 410, "{page}");
    assert!(page.contains("interrupted") && page.contains("Start again from your MCP client"), "{page}");
    assert!(!page.contains("already used"), "{page}");
    let row = app.state.core.store.authorizations().by_id(id).await.unwrap().unwrap();
    assert_eq!(row.status, AuthorizationStatus::Failed);
    assert_eq!(row.failure.as_deref(), Some("interrupted"));
    // Starting again gives a fresh link.
    match me(&client).await {
        Err(ServiceError::McpError(e)) => assert_ne!(e.data.unwrap()["elicitations"][0]["elicitationId"], id),
        other => panic!("expected a new -32042, got {other:?}"),
    }
}
on_both_backends!(interrupted_exchange_reload, a_callback_reloaded_after_an_interrupted_exchange_says_to_start_again);

async fn abandoned_exchanges_are_settled_and_the_waiting_session_is_told(app: &TestApp) {
    // Arrange: a row left `exchanging` by a stopped process, for a session that waits on it.
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let error = match me(&client).await {
        Err(ServiceError::McpError(e)) => e,
        other => panic!("expected -32042, got {other:?}"),
    };
    let elicitation = &error.data.unwrap()["elicitations"][0];
    let (url, id) = (elicitation["url"].as_str().unwrap().to_owned(), elicitation["elicitationId"].as_str().unwrap());
    let callback = callback_url_for(app, &app.browser(), &url).await;
    assert!(
        app.state
            .core
            .store
            .authorizations()
            .consume_state(id, &sha256_hex(&state_of(&callback)), app.now())
            .await
            .unwrap()
    );

    // A sweep while the exchange may still run leaves it alone.
    assert_eq!(flow::settle_interrupted_exchanges(&app.state.core).await.unwrap(), 0);

    // Act: the sweep after the exchange timeout.
    app.clock.advance(EXCHANGE_TIMEOUT_SECONDS + 1);
    assert_eq!(flow::settle_interrupted_exchanges(&app.state.core).await.unwrap(), 1);

    // Assert: failed as interrupted, and the session hears the elicitation is over.
    let row = app.state.core.store.authorizations().by_id(id).await.unwrap().unwrap();
    assert_eq!((row.status, row.failure.as_deref()), (AuthorizationStatus::Failed, Some("interrupted")));
    assert_eq!(client.next_completion(Duration::from_secs(10)).await.as_deref(), Some(id));
}
on_both_backends!(abandoned_exchange_sweep, abandoned_exchanges_are_settled_and_the_waiting_session_is_told);
