//! An instance killed in the middle of delivering webhook events (issue 27): nothing is lost,
//! and what is delivered twice carries the same id.
//!
//! Instance A runs in the test process with a manual clock; instance B is the real binary in
//! its own process on the same PostgreSQL database, killed with SIGKILL while the receiver holds
//! its requests: the receiver has the events, B never learns that it has. A's clock runs two
//! minutes behind B's, so nothing B wrote is due on A until the test moves A's clock past B's
//! leases: the instance that delivers each attempt is the one the test means.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use oauth_broker::store::webhooks::DeliveryStatus;
use serde_json::json;

use crate::helpers::cluster::OtherInstance;
use crate::helpers::webhooks::{Received, Receiver, WEBHOOK_TOML, service_with_webhook};
use crate::helpers::{ALICE, BOB, Backend, ClientKind, SpawnOptions, eventually, spawn_app_opts};

fn ids(received: &[Received]) -> Vec<String> {
    received.iter().map(|r| r.id.clone()).collect()
}

/// The event types one user's connection went through, in arrival order, each delivery once.
fn first_arrivals_of(received: &[Received], user_id: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    received
        .iter()
        .filter(|r| r.body["data"]["user_id"] == user_id && seen.insert(r.id.clone()))
        .map(|r| r.event_type().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_killed_mid_delivery_loses_no_event_and_a_repeat_carries_the_same_id() {
    let behind = chrono_now() - 120;
    let options = SpawnOptions { toml: WEBHOOK_TOML.into(), clock_at: Some(behind), ..Default::default() };
    let Some(a) = spawn_app_opts(Backend::Postgres, options, |b| b).await else { return };
    let receiver = Receiver::start().await;
    service_with_webhook(&a, "notes", &["demo"], &receiver).await;

    // Arrange: Alice and Bob connect on A; A delivers both events.
    let alice_on_a = a.connected_client(ALICE).await;
    let bob_on_a = a.connected_client(BOB).await;
    receiver.wait_for(2).await;
    // B waits as long as it may for an answer, so that its attempts are still open when it dies.
    let mut b = OtherInstance::start(&a, &format!("{WEBHOOK_TOML}timeout = \"60s\"\n")).await;

    // Act: both disconnect through B; B's deliveries reach the receiver, which keeps them and
    // does not answer; B is killed before it can record a thing.
    receiver.hold();
    for name in [ALICE, BOB] {
        let client = b.mcp_client(&a, name, ClientKind::Url).await;
        client.call("disconnect_account", json!({"provider": "demo"})).await.unwrap();
        client.close().await;
    }
    eventually("B's two deliveries reached the receiver", Duration::from_secs(30), || async { receiver.held() == 2 })
        .await;
    let in_flight: HashSet<String> = ids(&receiver.received()[2..]).into_iter().collect();
    let outbox = a.state.core.store.webhook_events().list(None, None, 100).await.unwrap();
    for row in outbox.iter().filter(|row| in_flight.contains(&row.event_id)) {
        assert_eq!((row.status, row.attempts), (DeliveryStatus::Pending, 0), "B's attempt is unfinished: {row:?}");
    }
    b.kill();
    receiver.release();

    // A's clock passes B's leases; Alice connects again on A, whose commit wakes its delivery.
    a.clock.advance(3600);
    let alice_again = a.connected_client(ALICE).await;
    let got = receiver.wait_for(7).await;
    eventually("every event is delivered", Duration::from_secs(30), || async {
        let rows = a.state.core.store.webhook_events().list(None, None, 100).await.unwrap();
        rows.iter().all(|row| row.status == DeliveryStatus::Delivered)
    })
    .await;

    // Assert: every event of the outbox reached the receiver; only the two in flight twice,
    // each time with the same id and the same signed body.
    let outbox = a.state.core.store.webhook_events().list(None, None, 100).await.unwrap();
    assert_eq!(outbox.len(), 5, "{outbox:?}");
    let delivered: HashSet<String> = outbox.iter().map(|row| row.event_id.clone()).collect();
    assert_eq!(ids(&got).into_iter().collect::<HashSet<_>>(), delivered, "nothing lost, nothing invented");
    let mut copies: HashMap<&str, Vec<&Received>> = HashMap::new();
    for received in &got {
        copies.entry(received.id.as_str()).or_default().push(received);
    }
    let repeated: HashSet<String> =
        copies.iter().filter(|(_, c)| c.len() > 1).map(|(id, _)| (*id).to_owned()).collect();
    assert_eq!(repeated, in_flight, "only the attempts B never finished are repeated");
    for id in &repeated {
        let bodies: HashSet<&str> = copies[id.as_str()].iter().map(|r| r.raw.as_str()).collect();
        assert_eq!(bodies.len(), 1, "a repeat is the same event: {id}");
        assert_eq!(copies[id.as_str()].len(), 2, "once by B, once by A: {id}");
    }
    // Each repeated event counts the one attempt A finished; B's never reached the outbox.
    for row in outbox.iter().filter(|row| in_flight.contains(&row.event_id)) {
        assert_eq!(row.attempts, 1, "{row:?}");
    }
    assert_eq!(receiver.unverified(), 0, "every delivery was signed");

    // And in order per connection: Alice's new connection is heard after her disconnection.
    let alice_id = a.user_id(ALICE).await;
    assert_eq!(first_arrivals_of(&got, &alice_id), ["connection.created", "connection.revoked", "connection.created"]);
    let bob_id = a.user_id(BOB).await;
    assert_eq!(first_arrivals_of(&got, &bob_id), ["connection.created", "connection.revoked"]);

    for client in [alice_on_a, bob_on_a, alice_again] {
        client.close().await;
    }
    receiver.stop();
    a.stop().await;
}

/// Seconds since the epoch by the machine's clock (what B, a real process, goes by).
fn chrono_now() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    i64::try_from(since.as_secs()).unwrap()
}
