//! Gateway mode: subscriptions to a resource of a server that speaks the stateless 2026-07-28
//! revision (`tests/python/echo_server.py`, the official MCP Python SDK, its own process). Such a
//! server has no `resources/subscribe`: the broker listens to it (`subscriptions/listen`) over the
//! user's own connection, one listen per resource whatever the number of the user's sessions
//! holding it, passes its updates on under the gateway's URI, and cancels the listen when the
//! last holder lets go — for a 2025-11-25 session's `resources/subscribe` and a 2026-07-28
//! client's own listen alike.

// `resources/subscribe` and `resources/unsubscribe` are what a 2025-11-25 session sends.
#![allow(deprecated)]

use std::time::Duration;

use rmcp::model::{ServerNotification, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams};
use serde_json::json;

use crate::helpers::gateway::{add_provider_server, connected_2025, connected_2026};
use crate::helpers::python::python_server;
use crate::helpers::*;
use crate::on_both_backends;

const HELLO: &str = "gateway://pyecho/pynote://hello";

/// How many listen streams the server has open, asked by `client`.
async fn listens_on_server(client: &McpClient) -> u64 {
    let answer = client.call("pyecho_listening", json!({})).await.unwrap();
    answer.structured_content.expect("the server's count")["streams"].as_u64().unwrap()
}

async fn touch(client: &McpClient) {
    let touched = client.call("pyecho_touch", json!({"uri": "pynote://hello"})).await.unwrap();
    assert_ne!(touched.is_error, Some(true), "{touched:?}");
}

async fn a_2025_session_subscribes_to_a_stateless_servers_resource_through_one_listen_of_the_brokers(app: &TestApp) {
    // Arrange: the Python server behind the broker; two sessions of alice's; bob (a 2026-07-28
    // client) touches the resource and counts the server's listens.
    let Some(upstream) = python_server(app).await else { return };
    add_provider_server(app, "pyecho", &upstream).await;
    let alice = connected_2025(app, "pyecho", ALICE, "alice-demo").await;
    let alice_again = app.mcp_client(ALICE, ClientKind::Url).await;
    let bob = connected_2026(app, "pyecho_whoami", BOB, "bob-demo").await;
    assert_eq!(listens_on_server(&bob).await, 0);

    // Act: both of alice's sessions subscribe to the server's resource.
    alice.peer().subscribe(SubscribeRequestParams::new(HELLO)).await.unwrap();
    alice_again.peer().subscribe(SubscribeRequestParams::new(HELLO)).await.unwrap();

    // Assert: the broker listens to the server once, for alice.
    assert_eq!(listens_on_server(&bob).await, 1, "one listen for the user's connection");

    // Act: the resource changes on the server.
    touch(&bob).await;

    // Assert: both of alice's sessions hear it under the gateway's URI.
    assert_eq!(alice.next_resource_update(Duration::from_secs(10)).await.as_deref(), Some(HELLO));
    assert_eq!(alice_again.next_resource_update(Duration::from_secs(10)).await.as_deref(), Some(HELLO));

    // Act: one session lets go; then the other.
    alice.peer().unsubscribe(UnsubscribeRequestParams::new(HELLO)).await.unwrap();
    assert_eq!(listens_on_server(&bob).await, 1, "the other session still holds it");
    alice_again.peer().unsubscribe(UnsubscribeRequestParams::new(HELLO)).await.unwrap();

    // Assert: the last one's letting go ends the broker's listen on the server.
    eventually("the broker's listen on the server ends", Duration::from_secs(10), || async {
        listens_on_server(&bob).await == 0
    })
    .await;
    alice.close().await;
    alice_again.close().await;
    upstream.stop().await;
}
on_both_backends!(
    stateless_subscribe,
    a_2025_session_subscribes_to_a_stateless_servers_resource_through_one_listen_of_the_brokers
);

async fn a_2026_clients_listen_naming_a_stateless_servers_resource_hears_its_updates(app: &TestApp) {
    // Arrange
    let Some(upstream) = python_server(app).await else { return };
    add_provider_server(app, "pyecho", &upstream).await;
    let alice = connected_2025(app, "pyecho", ALICE, "alice-demo").await;
    let bob = connected_2026(app, "pyecho_whoami", BOB, "bob-demo").await;

    // Act: bob listens to the server's resource.
    let filter = SubscriptionFilter::builder().resource_subscription(HELLO).build();
    let mut listening = bob.peer().listen(filter).await.unwrap();

    // Assert: acknowledged, and held on the server by a listen of the broker's.
    assert_eq!(listening.acknowledged().resource_subscriptions.clone().unwrap_or_default(), [HELLO]);
    eventually("the broker listens to the server", Duration::from_secs(10), || async {
        listens_on_server(&alice).await == 1
    })
    .await;

    // Act: the resource changes.
    touch(&alice).await;

    // Assert: bob's listen hears it under the gateway's URI.
    let heard = tokio::time::timeout(Duration::from_secs(10), listening.next()).await.unwrap().unwrap();
    let Some(ServerNotification::ResourceUpdatedNotification(updated)) = heard else {
        panic!("a resource update: {heard:?}")
    };
    assert_eq!(updated.params.uri, HELLO);

    // Act + Assert: bob stops listening; the broker's listen on the server ends.
    listening.cancel().await.unwrap();
    eventually("the broker's listen on the server ends", Duration::from_secs(10), || async {
        listens_on_server(&alice).await == 0
    })
    .await;
    alice.close().await;
    upstream.stop().await;
}
on_both_backends!(stateless_listen, a_2026_clients_listen_naming_a_stateless_servers_resource_hears_its_updates);
