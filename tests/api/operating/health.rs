//! `/healthz` and `/readyz` (issue 10): ready means the database answers, every migration is
//! applied and the process is not draining; alive means only that the process answers.

use serde_json::{Value, json};

use crate::helpers::db_proxy::{DbProxy, Mode, postgres_upstream};
use crate::helpers::{Backend, TestApp, eventually, spawn_app_opts};
use crate::on_both_backends;

async fn readyz(app: &TestApp) -> (u16, Value) {
    let response = app.http().get(app.url("/readyz")).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

async fn healthz(app: &TestApp) -> u16 {
    app.http().get(app.url("/healthz")).send().await.unwrap().status().as_u16()
}

/// `/readyz` until it answers `want`: a pool reconnecting after an outage takes a moment, and
/// the test waits for that event, not for a fixed time.
async fn readyz_until(app: &TestApp, want: u16) -> Value {
    eventually(&format!("/readyz answers {want}"), std::time::Duration::from_secs(30), || async {
        let (status, body) = readyz(app).await;
        if status == want { Ok(body) } else { Err(format!("{status} {body}")) }
    })
    .await
}

async fn ready_unless_draining_or_behind_on_migrations(app: &TestApp) {
    let (status, body) = readyz(app).await;
    assert_eq!(status, 200, "{body}");
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        body,
        json!({"ready": true, "version": version, "database": "ok", "migrations": "ok", "keys": "loaded", "draining": false})
    );

    // A migration this binary knows that the database lacks (an instance started against an
    // older schema): not ready, and the body says why.
    let (version,): (i64,) = sqlx::query_as("SELECT MAX(version) FROM _sqlx_migrations")
        .fetch_one(app.state.core.store.pool())
        .await
        .unwrap();
    sqlx::query("UPDATE _sqlx_migrations SET version = -version WHERE version = $1")
        .bind(version)
        .execute(app.state.core.store.pool())
        .await
        .unwrap();
    let (status, body) = readyz(app).await;
    assert_eq!((status, &body["migrations"], &body["ready"]), (503, &json!("pending"), &json!(false)), "{body}");
    sqlx::query("UPDATE _sqlx_migrations SET version = -version WHERE version = $1")
        .bind(-version)
        .execute(app.state.core.store.pool())
        .await
        .unwrap();
    assert_eq!(readyz(app).await.0, 200);

    // After a stop signal: not ready (the load balancer sends new work elsewhere), still alive.
    app.state.draining.cancel();
    let (status, body) = readyz(app).await;
    assert_eq!((status, &body["draining"], &body["database"]), (503, &json!(true), &json!("ok")), "{body}");
    assert_eq!(healthz(app).await, 200);
}
on_both_backends!(readiness_checks, ready_unless_draining_or_behind_on_migrations);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_goes_unready_while_the_database_is_away_and_ready_again_after() {
    let proxy = DbProxy::start(postgres_upstream()).await;
    let options = proxy.spawn_options("database_timeout = \"1s\"\n");
    let Some(app) = spawn_app_opts(Backend::Postgres, options, |b| b).await else { return };
    assert_eq!(readyz(&app).await.0, 200);

    // The database goes away: not ready within the probe's bound, and alive all the same.
    proxy.set(Mode::Cut);
    let body = readyz_until(&app, 503).await;
    assert_ne!(body["database"], "ok", "{body}");
    assert_eq!(body["migrations"], "unknown", "{body}");
    assert!(!body.to_string().contains("127.0.0.1"), "no error text in the answer: {body}");
    assert_eq!(healthz(&app).await, 200);

    // It comes back: ready again, with no restart.
    proxy.set(Mode::Forward);
    let body = readyz_until(&app, 200).await;
    assert_eq!(body["database"], "ok");
    app.stop().await;
}
