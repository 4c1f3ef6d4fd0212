//! Gateway mode: a 2025-11-25 session's `resources/subscribe` to a resource of a server behind
//! the broker (`examples/upstream_server.rs`, its own process, which offers subscriptions). The
//! subscription is made on the server over the user's own connection, kept open while it is
//! held (even past the idle timeout), its updates reach that user's subscribed sessions only,
//! under the gateway's URI, and the server is told when the last session lets go. A 2026-07-28
//! client's `subscriptions/listen` naming the server's resource holds the same subscription
//! while it listens.

use std::time::Duration;

use rmcp::model::{ServerNotification, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams};
use serde_json::json;

use crate::helpers::gateway::{approve_pair, asking_server, server_saw};
use crate::helpers::*;
use crate::on_both_backends;

/// An app whose idle connections to servers close after one second.
async fn spawn_with_short_idle(backend: Backend) -> Option<TestApp> {
    let options = SpawnOptions { toml: "[gateway]\nidle = \"1s\"\n".into(), ..Default::default() };
    spawn_app_opts(backend, options, |builder| builder).await
}

/// How many of the server's sessions are subscribed to its `uri`, asked by `client`.
async fn subscribers(client: &McpClient, uri: &str) -> u64 {
    let answer = client.call("crm_subscribers", json!({"uri": uri})).await.unwrap();
    server_saw(&answer)["sessions"].as_u64().unwrap()
}

const WHOAMI: &str = "gateway://crm/note://whoami";
const BOBS: &str = "gateway://crm/note://echo/bob";

#[allow(deprecated, reason = "resources/subscribe is what a 2025-11-25 session sends")]
async fn a_subscription_to_a_servers_resource_is_held_on_the_users_connection_and_its_updates_reach_that_user(
    app: &TestApp,
) {
    // Arrange: the server behind the broker; alice and bob have each allowed their client.
    let upstream = asking_server(app).await;
    approve_pair(app, BOB).await;
    let alice = app.mcp_client(ALICE, ClientKind::Url).await;
    let bob = app.mcp_client(BOB, ClientKind::Url).await;

    // Act: alice subscribes to a resource of the server; bob only calls a tool.
    alice.peer().subscribe(SubscribeRequestParams::new(WHOAMI)).await.unwrap();
    assert_eq!(subscribers(&bob, "note://whoami").await, 1, "the server holds the subscription");

    // Assert: bob's idle connection closes; alice's, which the subscription holds, stays open.
    eventually("bob's idle connection closes", Duration::from_secs(20), || async {
        app.gateway.open_connections() == 1
    })
    .await;

    // Act: the resource changes on the server.
    let touched = bob.call("crm_touch", json!({"uri": "note://whoami"})).await.unwrap();
    assert_eq!(server_saw(&touched)["notified"], 1);

    // Assert: alice hears it under the gateway's URI, over the connection kept open.
    assert_eq!(alice.next_resource_update(Duration::from_secs(10)).await.as_deref(), Some(WHOAMI));

    // Act + Assert: bob subscribes to another resource and hears only his own update — alice's
    // would have come first on his stream.
    bob.peer().subscribe(SubscribeRequestParams::new(BOBS)).await.unwrap();
    let touched = alice.call("crm_touch", json!({"uri": "note://echo/bob"})).await.unwrap();
    assert_eq!(server_saw(&touched)["notified"], 1);
    assert_eq!(bob.next_resource_update(Duration::from_secs(10)).await.as_deref(), Some(BOBS));

    // Unknown servers are not found; the audit names the subscription, not the URI.
    let unknown = alice.peer().subscribe(SubscribeRequestParams::new("gateway://nobody/note://whoami")).await;
    assert!(matches!(&unknown, Err(rmcp::ServiceError::McpError(e)) if e.code.0 == -32002), "{unknown:?}");
    app.state.core.store.audit_queue().flush().await;
    let entries = app.state.core.store.audit().entries(Some(&app.user_id(ALICE).await), 100).await.unwrap();
    let details: Vec<String> = entries.iter().filter_map(|e| e.detail.clone()).collect();
    assert!(details.iter().any(|d| d.contains("server=crm resource=subscribe outcome=ok")), "{details:?}");
    assert!(details.iter().all(|d| !d.contains("whoami")), "{details:?}");

    // The connections are counted (the gauge is the test process's: every app's together).
    let metrics = oauth_broker::telemetry::render().expect("the metrics recorder is installed");
    assert!(metrics.contains("oauth_broker_gateway_connections_open "), "{metrics}");

    // Act: alice unsubscribes.
    alice.peer().unsubscribe(UnsubscribeRequestParams::new(WHOAMI)).await.unwrap();

    // Assert: the server is told, and alice's connection, held no longer, closes as idle.
    eventually("the server is told alice let go", Duration::from_secs(10), || async {
        subscribers(&bob, "note://whoami").await == 0
    })
    .await;
    eventually("alice's idle connection closes", Duration::from_secs(20), || async {
        app.gateway.open_connections() == 1
    })
    .await;

    // Act + Assert: bob's session ends; the server is told he let go too.
    bob.close().await;
    eventually("the server is told bob's session ended", Duration::from_secs(20), || async {
        subscribers(&alice, "note://echo/bob").await == 0
    })
    .await;
    alice.close().await;
    upstream.stop().await;
}

mod held_subscription {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        let app = spawn_with_short_idle(Backend::Sqlite).await.unwrap();
        a_subscription_to_a_servers_resource_is_held_on_the_users_connection_and_its_updates_reach_that_user(&app)
            .await;
        app.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        let Some(app) = spawn_with_short_idle(Backend::Postgres).await else { return };
        a_subscription_to_a_servers_resource_is_held_on_the_users_connection_and_its_updates_reach_that_user(&app)
            .await;
        app.stop().await;
    }
}

// ---- MCP 2026-07-28 subscriptions/listen ----

fn listening_to(uris: &[&str]) -> SubscriptionFilter {
    uris.iter().fold(SubscriptionFilter::builder(), |filter, uri| filter.resource_subscription(*uri)).build()
}

async fn a_listen_naming_a_servers_resource_holds_a_subscription_on_the_server_while_it_listens(app: &TestApp) {
    // Arrange: the server behind the broker; alice and bob have each allowed their client.
    let upstream = asking_server(app).await;
    approve_pair(app, BOB).await;
    let alice = app.mcp_client_2026(ALICE, ClientKind::Url).await;
    let bob = app.mcp_client(BOB, ClientKind::Url).await;

    // Act: alice listens to a resource of the server, one of a server that is not registered,
    // and one of the broker's own.
    let mut listening = alice
        .peer()
        .listen(listening_to(&[WHOAMI, "gateway://nobody/note://whoami", "broker://connections"]))
        .await
        .unwrap();

    // Assert: the acknowledgement names what will come; the server holds the subscription.
    let acknowledged = listening.acknowledged().resource_subscriptions.clone().unwrap_or_default();
    assert_eq!(acknowledged, [WHOAMI, "broker://connections"], "the unknown server's URI is left out");
    eventually("the server holds the listen's subscription", Duration::from_secs(10), || async {
        subscribers(&bob, "note://whoami").await == 1
    })
    .await;

    // Act: the resource changes on the server.
    let touched = bob.call("crm_touch", json!({"uri": "note://whoami"})).await.unwrap();
    assert_eq!(server_saw(&touched)["notified"], 1);

    // Assert: alice's listen hears it, under the gateway's URI.
    let heard = tokio::time::timeout(Duration::from_secs(10), listening.next()).await.unwrap().unwrap();
    let Some(ServerNotification::ResourceUpdatedNotification(updated)) = heard else {
        panic!("a resource update: {heard:?}")
    };
    assert_eq!(updated.params.uri, WHOAMI);

    // Act: alice stops listening.
    listening.cancel().await.unwrap();

    // Assert: the server is told she let go.
    eventually("the server is told the listen ended", Duration::from_secs(10), || async {
        subscribers(&bob, "note://whoami").await == 0
    })
    .await;
    alice.close().await;
    bob.close().await;
    upstream.stop().await;
}
on_both_backends!(listen_held, a_listen_naming_a_servers_resource_holds_a_subscription_on_the_server_while_it_listens);

async fn a_listen_naming_a_servers_resource_the_user_has_not_allowed_ends_saying_what_to_do(app: &TestApp) {
    // Arrange: alice has allowed her client for the server; bob has not.
    let upstream = asking_server(app).await;
    let alice = app.mcp_client(ALICE, ClientKind::Url).await;
    let bob = app.mcp_client_2026(BOB, ClientKind::Url).await;

    // Act
    let mut listening = bob.peer().listen(listening_to(&[WHOAMI])).await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(10), listening.next()).await.unwrap();

    // Assert: the listen ends with the reason and what to do; nothing is held on the server.
    let Err(rmcp::ServiceError::McpError(error)) = ended else { panic!("the listen ends with an error: {ended:?}") };
    assert_eq!(error.code.0, -32602, "{error:?}");
    assert!(error.message.contains("read it to be asked, then listen again"), "{error:?}");
    assert_eq!(subscribers(&alice, "note://whoami").await, 0);
    alice.close().await;
    bob.close().await;
    upstream.stop().await;
}
on_both_backends!(
    listen_not_allowed,
    a_listen_naming_a_servers_resource_the_user_has_not_allowed_ends_saying_what_to_do
);
