//! Two real server processes on one PostgreSQL (issue 12): the test process runs instance A,
//! the real binary runs instance B ([`crate::helpers::cluster::OtherInstance`]). Concurrent calls on an
//! expired grant, split across both, make exactly one refresh at the provider: the in-process
//! mutex serialises each instance, the lease on the row serialises the two.

use std::sync::Arc;
use std::time::Duration;

use crate::helpers::cluster::OtherInstance;
use crate::helpers::strict_provider::{StrictProvider, connect_strict, me, spawn, status_of};
use crate::helpers::{ALICE, Backend, ClientKind};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_calls_on_an_expired_grant_across_two_processes_refresh_it_exactly_once() {
    let provider = StrictProvider::start(Duration::from_secs(3600)).await;
    let Some(a) = spawn(Backend::Postgres, &provider, "").await else { return };
    let on_a = Arc::new(connect_strict(&a).await);
    let b = OtherInstance::start(&a, &provider.toml()).await;
    let on_b = Arc::new(b.mcp_client(&a, ALICE, ClientKind::Url).await);
    assert_eq!(status_of(&me(&on_b).await.unwrap()), 200, "B serves the same connection");
    let connected = provider.issued();

    // Arrange: both instances agree on the time: A's clock was fixed at its start and B's is the
    // wall clock, so on a slow machine B could otherwise see A's refresh lease as long expired
    // and refresh a second time. Then the grant expired a second ago for both.
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    a.clock.advance((wall - a.now()).max(0));
    let user = a.user_id(ALICE).await;
    let grant = a.state.core.store.grants().latest(&user, "strict", None).await.unwrap().unwrap();
    sqlx::query("UPDATE grants SET expires_at = $1 WHERE id = $2")
        .bind(a.now() - 1)
        .bind(&grant.id)
        .execute(a.state.core.store.pool())
        .await
        .unwrap();

    // Act: 20 concurrent calls, every other one on B.
    let calls: Vec<_> = (0..20)
        .map(|i| {
            let client = if i % 2 == 0 { on_a.clone() } else { on_b.clone() };
            tokio::spawn(async move { me(&client).await })
        })
        .collect();

    // Assert: all succeed, with the one new token, and the provider saw one refresh.
    for call in calls {
        let result = call.await.unwrap().unwrap();
        assert_eq!(status_of(&result), 200, "{result:?}");
        let number = &result.structured_content.as_ref().unwrap()["body"]["token_number"];
        assert_eq!(number.as_u64(), Some(connected + 1), "the refreshed token");
    }
    assert_eq!(provider.refresh_requests(), 1, "exactly one refresh across two processes");
    assert_eq!(provider.invalid_grants(), 0);
    assert_eq!(provider.issued(), connected + 1);
    let after = a.state.core.store.grants().latest(&user, "strict", None).await.unwrap().unwrap();
    assert!(after.expires_at.unwrap() > a.now());
    drop(b);
    a.stop().await;
}
