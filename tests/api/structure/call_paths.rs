//! Not a check but a measurement: `bench/call-path.sh` runs this under callgrind and reads which
//! of the broker's source files one tool call walks through. Between the two markers the client
//! makes exactly one call on a connection that is ready (the user connected, the caches warm),
//! so what callgrind records is that call's path and nothing of the setup.

use serde_json::json;

use crate::helpers::gateway::{Upstream, add_provider_server, connect_through_link};
use crate::helpers::*;

/// Where callgrind starts counting: the test runs uninstrumented (`--instr-atstart=no`, fast
/// enough that the setup's own deadlines hold), and `callgrind_control` switches instrumentation
/// on and zeroes the counters just before the measured call. Outside callgrind, nothing.
fn call_path_measure_start() {
    callgrind_control(&["--instr=on"]);
    callgrind_control(&["--zero"]);
}

/// Where callgrind writes what it counted since the start, then stops instrumenting.
fn call_path_measure_stop() {
    callgrind_control(&["--dump"]);
    callgrind_control(&["--instr=off"]);
}

fn callgrind_control(args: &[&str]) {
    if std::env::var_os("CALL_PATH_UNDER_CALLGRIND").is_none() {
        return;
    }
    let status = std::process::Command::new("callgrind_control")
        .args(args)
        .arg(std::process::id().to_string())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("callgrind_control runs");
    assert!(status.success(), "callgrind_control {args:?}: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: bench/call-path.sh runs it under callgrind"]
async fn a_provider_request_and_a_forwarded_call_on_a_ready_connection() {
    // Under callgrind the measured call runs some fifty times slower: the database's deadline
    // is stretched to match, or the pool's waits would end it as a timeout.
    let options = SpawnOptions { toml: "database_timeout = \"300s\"\n".into(), ..Default::default() };
    let app = spawn_app_opts(Backend::Sqlite, options, |builder| builder).await.unwrap();
    // Two users, so that each call's connection is made the way its own tests make it.
    let client = app.connected_client(BOB).await;
    let me = json!({"provider": "demo", "method": "GET", "path": "/me"});
    for _ in 0..3 {
        assert_ne!(client.call("provider_request", me.clone()).await.unwrap().is_error, Some(true));
    }
    call_path_measure_start();
    let measured = client.call("provider_request", me.clone()).await.unwrap();
    call_path_measure_stop();
    assert_ne!(measured.is_error, Some(true), "{measured:?}");

    let upstream = Upstream::bearer(&app).await;
    add_provider_server(&app, "notes", &upstream).await;
    client.close().await;
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    connect_through_link(&app, &client, "notes_connect", ALICE, "alice-demo").await;
    assert_ne!(client.call("notes_connect", json!({})).await.unwrap().is_error, Some(true));
    for _ in 0..3 {
        assert_ne!(client.call("notes_whoami", json!({})).await.unwrap().is_error, Some(true));
    }
    call_path_measure_start();
    let forwarded = client.call("notes_whoami", json!({})).await.unwrap();
    call_path_measure_stop();
    assert_ne!(forwarded.is_error, Some(true), "{forwarded:?}");

    client.close().await;
    upstream.stop().await;
    app.stop().await;
}
