//! Parked sessions (issue 11): an MCP session with nothing in flight for `mcp_session_park`
//! gives up its rmcp service and comes back with a new one at its next message. Parking must
//! not show: the GET stream keeps receiving what belongs to no request (completions, resource
//! updates), what the session asked for (subscriptions, elicitations) survives, the server's
//! request ids never repeat, a session with something in flight is never parked, and a parked
//! session still ends on DELETE, idle expiry and shutdown.
//!
//! Parking runs on real time (a sweep every half `mcp_session_park`, 1 s here); the tests wait
//! for the app's count of parked sessions, never for a fixed time.

// `resources/subscribe` is deprecated for 2026-07-28 but is part of 2025-11-25.
#![allow(deprecated)]

use std::time::Duration;

use oauth_broker::mcp::session::IDLE_SECONDS;
use rmcp::model::SubscribeRequestParams;
use serde_json::{Value, json};

use crate::helpers::streams::{Events, RawSession};
use crate::helpers::{ALICE, Backend, ClientKind, SpawnOptions, TestApp, eventually, spawn_app_opts};

const CONNECTIONS: &str = "broker://connections";
/// Long enough for a loaded machine; the waits end as soon as the count is reached.
const PARKING_WITHIN: Duration = Duration::from_secs(30);

/// An app whose sessions park after 1 s with nothing in flight (the shortest setting).
async fn parking_app(backend: Backend) -> Option<TestApp> {
    let options = SpawnOptions { toml: "mcp_session_park = \"1s\"\n".into(), ..Default::default() };
    spawn_app_opts(backend, options, |builder| builder).await
}

macro_rules! with_parking {
    ($name:ident, $body:ident) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let app = parking_app(Backend::Sqlite).await.unwrap();
                $body(&app).await;
                app.stop().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some(app) = parking_app(Backend::Postgres).await else { return };
                $body(&app).await;
                app.stop().await;
            }
        }
    };
}

/// Waits until exactly `count` of the app's sessions are parked.
async fn parked(app: &TestApp, count: usize) {
    eventually(&format!("{count} session(s) parked"), PARKING_WITHIN, || async {
        let now = app.parked.get();
        if now == count { Ok(()) } else { Err(format!("{now} parked")) }
    })
    .await;
}

async fn delete(session: &RawSession) -> u16 {
    reqwest::Client::new()
        .delete(&session.mcp_url)
        .bearer_auth(&session.token)
        .header("mcp-session-id", &session.id)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

fn message(event: &crate::helpers::streams::Event) -> Value {
    serde_json::from_str(&event.data).unwrap()
}

async fn a_parked_session_comes_back_and_keeps_its_stream_subscriptions_and_elicitations(app: &TestApp) {
    // Arrange: a real client listening on its GET stream, subscribed to its connections, with a
    // connect link of its own (an elicitation the session started).
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    client.peer().subscribe(SubscribeRequestParams::new(CONNECTIONS)).await.unwrap();
    let error = match client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await
    {
        Err(rmcp::ServiceError::McpError(e)) => e,
        other => panic!("expected -32042, got {other:?}"),
    };
    let elicitation = &error.data.unwrap()["elicitations"][0];
    let (url, id) = (elicitation["url"].as_str().unwrap().to_owned(), elicitation["elicitationId"].as_str().unwrap());
    parked(app, 1).await;

    // Act: the user approves while the session is parked.
    let browser = app.browser();
    assert_eq!(app.approve_in_browser(&browser, &url, ALICE).await.status(), 200);

    // Assert: the completion and the update reach the parked session's GET stream, without
    // bringing its service back; then its next requests are answered by a new one, in order.
    assert_eq!(client.next_completion(Duration::from_secs(10)).await.as_deref(), Some(id));
    assert_eq!(client.next_resource_update(Duration::from_secs(10)).await.as_deref(), Some(CONNECTIONS));
    assert_eq!(app.parked.get(), 1, "notifications do not need the service");
    for _ in 0..3 {
        let me = client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
        assert_eq!(me.unwrap().structured_content.unwrap()["status"], 200);
    }
    // Parked again, and back again: a second service of the session works as well.
    parked(app, 1).await;
    assert!(client.call("list_connections", json!({})).await.is_ok());
    client.close().await;
    assert_eq!(app.parked.get(), 0);
}
with_parking!(park_and_revive, a_parked_session_comes_back_and_keeps_its_stream_subscriptions_and_elicitations);

async fn a_session_waiting_for_a_form_answer_is_not_parked_and_request_ids_never_repeat(app: &TestApp) {
    // Arrange: Alice has a demo account; disconnecting it asks to confirm in a form.
    app.connected_client(ALICE).await.close().await;
    let token = app.token_for(ALICE).await;
    let waiting = RawSession::open(&app.mcp_url(), &token).await;
    let disconnect = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "disconnect_account", "arguments": {"provider": "demo"}}})
    };
    let mut call = Events::new(waiting.post(disconnect(2)).await);
    let asked = message(&call.next_message().await);
    assert_eq!(asked["method"], "elicitation/create", "{asked}");

    // Act: sessions whose last message came after that question park (the second one after
    // the first's sweep, so that sweep is over).
    let idle = RawSession::open(&app.mcp_url(), &token).await;
    assert_eq!(idle.request("prompts/list").await, 200);
    parked(app, 1).await;
    let later = RawSession::open(&app.mcp_url(), &token).await;
    parked(app, 2).await;

    // Assert: the session waiting for the form answer still has its service; answered, its
    // call ends and it parks too.
    assert_eq!(app.parked.get(), 2, "a session with a request in flight is not parked");
    let decline = |id: &Value| json!({"jsonrpc": "2.0", "id": id, "result": {"action": "decline"}});
    assert_eq!(waiting.post(decline(&asked["id"])).await.status(), 202);
    let answer = message(&call.next_message().await);
    assert_eq!(answer["id"], 2, "{answer}");
    assert!(answer["result"]["content"].to_string().contains("Nothing was disconnected"), "{answer}");
    parked(app, 3).await;

    // And after parking the server's next question has a new id (a revived service counts
    // from 0 again); an answer to the old id reaches nobody, the answer to the new one does.
    let mut again = Events::new(waiting.post(disconnect(3)).await);
    let asked_again = message(&again.next_message().await);
    assert_eq!(asked_again["method"], "elicitation/create", "{asked_again}");
    assert_ne!(asked_again["id"], asked["id"], "a request id is never reused within a session");
    assert_eq!(waiting.post(decline(&asked["id"])).await.status(), 202);
    assert_eq!(waiting.post(decline(&asked_again["id"])).await.status(), 202);
    let answer = message(&again.next_message().await);
    assert_eq!(answer["id"], 3, "{answer}");
    assert!(answer["result"]["content"].to_string().contains("Nothing was disconnected"), "{answer}");
    for session in [&waiting, &idle, &later] {
        delete(session).await;
    }
}
with_parking!(form_in_flight, a_session_waiting_for_a_form_answer_is_not_parked_and_request_ids_never_repeat);

async fn delete_and_idle_expiry_close_parked_sessions(app: &TestApp) {
    let token = app.token_for(ALICE).await;
    // DELETE: the parked session's GET stream ends, and it is gone.
    let listening = RawSession::open(&app.mcp_url(), &token).await;
    let mut stream = Events::new(listening.listen(None).await);
    stream.next().await.unwrap();
    parked(app, 1).await;
    assert!(delete(&listening).await < 300);
    // Only a reconnection hint may come before the end.
    while let Some(event) = stream.next().await {
        assert!(event.data.is_empty(), "nothing but the end: {event:?}");
    }
    assert_eq!(app.parked.get(), 0);
    assert_eq!(listening.request("prompts/list").await, 404);

    // Idle expiry: a parked session with nothing open ends like any idle one.
    let idle = RawSession::open(&app.mcp_url(), &token).await;
    parked(app, 1).await;
    app.clock.advance(IDLE_SECONDS + 60);
    let newcomer = RawSession::open(&app.mcp_url(), &token).await;
    assert!(delete(&newcomer).await < 300);
    assert_eq!(app.parked.get(), 0, "the expired session was closed");
    assert_eq!(idle.request("prompts/list").await, 404);
}
with_parking!(parked_sessions_close, delete_and_idle_expiry_close_parked_sessions);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_parked_sessions() {
    let app = parking_app(Backend::Sqlite).await.unwrap();
    let listening = RawSession::open(&app.mcp_url(), &app.token_for(ALICE).await).await;
    let mut stream = Events::new(listening.listen(None).await);
    stream.next().await.unwrap();
    parked(&app, 1).await;
    let count = app.parked.clone();

    app.stop().await;

    // The stream gets its reconnection hint and ends; the session is closed.
    while stream.next().await.is_some() {}
    eventually("the parked session is closed", PARKING_WITHIN, || async { count.get() == 0 }).await;
}
