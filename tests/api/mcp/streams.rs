//! SSE streams and session lifetime, read as raw HTTP (issue 14): each event is delivered once
//! (unique increasing ids, resume strictly after `Last-Event-ID`, a fresh GET replays nothing
//! old), and a session does not expire while its client listens or an authorization waits.

use std::time::Duration;

use oauth_broker::events::Signal;
use oauth_broker::mcp::session::IDLE_SECONDS;
use serde_json::json;

use crate::helpers::streams::{Event, Events, RawSession};
use crate::helpers::{ALICE, BOB, ClientKind, TestApp};
use crate::on_both_backends;

fn id_of(event: &Event) -> u64 {
    event.id.as_deref().expect("an event id").parse().expect("a numeric id")
}

/// Sends `prompts/list_changed` to every session of the app.
fn prompts_changed(app: &TestApp) {
    app.state.core.events.signal(Signal::PromptsChanged);
}

async fn a_session(app: &TestApp) -> RawSession {
    let session = RawSession::open(&app.mcp_url(), &app.token_for(ALICE).await).await;
    // The first request starts the session's relay of notifications.
    assert_eq!(session.request("prompts/list").await, 200);
    session
}

async fn each_event_is_delivered_once_and_resuming_starts_after_the_last_seen(app: &TestApp) {
    // Arrange: a listening session.
    let session = a_session(app).await;
    let mut first = Events::new(session.listen(None).await);
    let priming = first.next().await.unwrap();
    assert!(priming.data.is_empty() && priming.retry, "a priming event: {priming:?}");

    // Act: two notifications, then a resume after the first as if the connection dropped.
    prompts_changed(app);
    let one = first.next_message().await;
    prompts_changed(app);
    let two = first.next_message().await;
    let mut resumed = Events::new(session.listen(Some(one.id.as_deref().unwrap())).await);
    prompts_changed(app);
    let three = first.next_message().await;

    // Assert: ids are unique and increasing (never the priming event's); the resumed stream
    // starts strictly after the id it named and then follows live, each event once.
    assert_ne!(one.id, priming.id, "a message never shares the priming event's id");
    assert!(id_of(&one) < id_of(&two) && id_of(&two) < id_of(&three));
    assert_eq!(resumed.next_message().await.id, two.id, "the event named is not sent again");
    assert_eq!(resumed.next_message().await.id, three.id);
}
on_both_backends!(events_once, each_event_is_delivered_once_and_resuming_starts_after_the_last_seen);

async fn the_priming_id_resumes_from_that_stream_and_foreign_event_ids_open_nothing(app: &TestApp) {
    // Arrange: a session that saw only the priming event of its stream before the connection
    // dropped, and another user's session with an event of its own.
    let session = a_session(app).await;
    let mut first = Events::new(session.listen(None).await);
    let priming = first.next().await.unwrap();
    assert_eq!(priming.id.as_deref(), Some("0"));
    let another = RawSession::open(&app.mcp_url(), &app.token_for(BOB).await).await;
    assert_eq!(another.request("prompts/list").await, 200);
    let mut theirs = Events::new(another.listen(None).await);
    theirs.next().await.unwrap();
    prompts_changed(app);
    let missed = first.next_message().await;
    let their_event = theirs.next_message().await;

    // Act: resume after the priming event; and try to resume after the other session's event.
    let mut resumed = Events::new(session.listen(Some("0")).await);
    let mut foreign = Events::new(session.listen(Some(their_event.id.as_deref().unwrap())).await);

    // Assert: what came after the priming event, once; nothing of the other session's stream.
    assert_eq!(resumed.next_message().await.id, missed.id);
    prompts_changed(app);
    let live = resumed.next_message().await;
    assert!(id_of(&live) > id_of(&missed));
    assert!(foreign.next().await.is_none(), "another session's events are not replayed");
}
on_both_backends!(priming_resume, the_priming_id_resumes_from_that_stream_and_foreign_event_ids_open_nothing);

async fn a_listening_session_outlives_the_idle_timeout_and_an_idle_one_expires(app: &TestApp) {
    // Arrange: one session listening on its GET stream, one with nothing open.
    let listening = a_session(app).await;
    let mut stream = Events::new(listening.listen(None).await);
    stream.next().await.unwrap();
    let idle = a_session(app).await;

    // Act: six minutes pass; a new session arrives (which sweeps idle sessions).
    app.clock.advance(IDLE_SECONDS + 60);
    let _newcomer = a_session(app).await;
    prompts_changed(app);

    // Assert: the listener still gets notifications and its session answers; the idle one
    // is gone (404, the client initializes again).
    assert!(stream.next_message().await.data.contains("list_changed"));
    assert_eq!(listening.request("prompts/list").await, 200);
    assert_eq!(idle.request("prompts/list").await, 404);
}
on_both_backends!(session_lifetime, a_listening_session_outlives_the_idle_timeout_and_an_idle_one_expires);

async fn a_user_who_approves_after_six_minutes_still_gets_the_completion(app: &TestApp) {
    // Arrange: a real client holds its GET stream open and has a connect link.
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let error = match client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await
    {
        Err(rmcp::ServiceError::McpError(e)) => e,
        other => panic!("expected -32042, got {other:?}"),
    };
    let elicitation = &error.data.unwrap()["elicitations"][0];
    let (url, id) = (elicitation["url"].as_str().unwrap().to_owned(), elicitation["elicitationId"].as_str().unwrap());

    // Act: the user comes back six minutes later (sessions were swept meanwhile).
    app.clock.advance(IDLE_SECONDS + 60);
    let _newcomer = a_session(app).await;
    let browser = app.browser();
    assert_eq!(app.approve_in_browser(&browser, &url, ALICE).await.status(), 200);

    // Assert: the completion still reaches the session, which still works.
    assert_eq!(client.next_completion(Duration::from_secs(10)).await.as_deref(), Some(id));
    let me = client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
    assert_eq!(me.unwrap().structured_content.unwrap()["status"], 200);
}
on_both_backends!(late_approval, a_user_who_approves_after_six_minutes_still_gets_the_completion);

// A log message sent while a tool call runs travels on that call's own POST stream, before its
// answer (MCP transports: what the server sends before its answer SHOULD relate to the
// request), so a client that has not opened its GET stream yet still gets it.
async fn a_log_message_about_a_tool_call_arrives_on_that_calls_stream_before_its_answer(app: &TestApp) {
    app.connected_client(ALICE).await.close().await;
    let session = RawSession::open(&app.mcp_url(), &app.token_for(ALICE).await).await;
    let level =
        session.post(json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "info"}}));
    let level = level.await;
    assert_eq!(level.status(), 200);
    let _ = level.text().await;

    let call = session
        .post(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "provider_request", "arguments": {"provider": "demo", "method": "GET", "path": "/me"}}}))
        .await;
    let mut events = Events::new(call);
    let first: serde_json::Value = serde_json::from_str(&events.next_message().await.data).unwrap();
    assert_eq!(first["method"], "notifications/message", "the log message comes first: {first}");
    assert_eq!(first["params"]["data"]["status"], 200, "{first}");
    let answer: serde_json::Value = serde_json::from_str(&events.next_message().await.data).unwrap();
    assert_eq!(answer["id"], 2, "then the answer: {answer}");
    assert_eq!(answer["result"]["structuredContent"]["status"], 200, "{answer}");
}
on_both_backends!(
    log_message_on_the_calls_stream,
    a_log_message_about_a_tool_call_arrives_on_that_calls_stream_before_its_answer
);
