//! `/metrics` (issue 10): a scrape after a full connect flow shows the counters moving, labels
//! carry route templates and closed sets (never a user, an id from a path or a secret), and on
//! the main listener only the metrics token may read it.

use serde_json::json;

use crate::helpers::{ALICE, Backend, SpawnOptions, TestApp, spawn_app_opts};

const TOKEN: &str = "metrics-token-0123456789abcdef";

async fn app_with_token() -> TestApp {
    let options = SpawnOptions { toml: format!("metrics_token = \"{TOKEN}\"\n"), ..Default::default() };
    spawn_app_opts(Backend::Sqlite, options, |b| b).await.unwrap()
}

async fn scrape(app: &TestApp) -> String {
    let response = app.http().get(app.url("/metrics")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
    response.text().await.unwrap()
}

/// The sum of `name`'s samples whose labels include every pair in `labels`.
fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.rsplit_once(' '))
        .filter(|(series, _)| {
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            metric == name && labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
        })
        .map(|(_, v)| v.parse::<f64>().unwrap())
        .sum()
}

// Issue 10: "a scrape of /metrics after a full flow shows the counters moving". The recorder is
// the process's, shared with tests running alongside, so each counter must have grown by at
// least what this flow did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_after_a_full_connect_flow_shows_the_counters_moving() {
    let app = app_with_token().await;
    let before = scrape(&app).await;

    let client = app.connected_client(ALICE).await;
    let me = json!({"provider": "demo", "method": "GET", "path": "/me"});
    assert_eq!(client.call("provider_request", me.clone()).await.unwrap().structured_content.unwrap()["status"], 200);
    // The demo provider's access tokens live an hour: the next call refreshes first.
    app.clock.advance(2 * 3600);
    assert_eq!(client.call("provider_request", me).await.unwrap().structured_content.unwrap()["status"], 200);
    client.call("disconnect_account", json!({"provider": "demo"})).await.unwrap();
    client.close().await;

    let after = scrape(&app).await;
    let grew = |name: &str, labels: &[(&str, &str)], by: f64| {
        let (was, is) = (value(&before, name, labels), value(&after, name, labels));
        assert!(is - was >= by, "{name}{labels:?} went from {was} to {is}, expected +{by}\n{after}");
    };
    grew("oauth_broker_http_requests_total", &[("method", "POST"), ("route", "/mcp"), ("status", "200")], 3.0);
    grew("oauth_broker_http_requests_total", &[("route", "/connect/{id}")], 1.0);
    grew("oauth_broker_http_requests_total", &[("route", "/oauth/callback/{provider}")], 1.0);
    grew("oauth_broker_http_request_duration_seconds_count", &[("route", "/mcp")], 3.0);
    grew("oauth_broker_mcp_requests_total", &[("method", "initialize")], 1.0);
    grew("oauth_broker_mcp_requests_total", &[("method", "tools/call"), ("tool", "provider_request")], 3.0);
    grew("oauth_broker_mcp_requests_total", &[("method", "tools/call"), ("tool", "disconnect_account")], 1.0);
    grew("oauth_broker_authorizations_total", &[("outcome", "completed")], 1.0);
    grew("oauth_broker_upstream_requests_total", &[("provider", "demo"), ("call", "token"), ("result", "ok")], 1.0);
    grew("oauth_broker_upstream_requests_total", &[("provider", "demo"), ("call", "api"), ("result", "2xx")], 2.0);
    grew("oauth_broker_upstream_requests_total", &[("provider", "demo"), ("call", "revoke"), ("result", "ok")], 1.0);
    grew("oauth_broker_upstream_duration_seconds_count", &[("provider", "demo"), ("call", "refresh")], 1.0);
    grew("oauth_broker_refreshes_total", &[("provider", "demo"), ("outcome", "success")], 1.0);
    grew("oauth_broker_audit_events_total", &[("action", "grant.stored"), ("outcome", "success")], 1.0);
    assert!(after.contains("oauth_broker_mcp_sessions_active"), "{after}");
    assert!(after.contains("oauth_broker_http_request_duration_seconds_bucket{"), "latency is a histogram");

    // Labels never carry a user, an authorization id from a path, or a token.
    let alice = app.user_id(ALICE).await;
    let authorization = app.state.core.store.authorizations().all(10).await.unwrap().remove(0).id;
    for secret in [alice.as_str(), authorization.as_str(), TOKEN, "alice"] {
        assert!(!after.contains(secret), "{secret} appears in the metrics");
    }
    app.stop().await;
}

// Issue 10: who may read /metrics on the main listener — the token's bearer only; without a
// token (or with a separate metrics listener) it is off there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_on_the_main_listener_answer_only_the_metrics_token() {
    let app = app_with_token().await;
    let http = app.http();
    let none = http.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(none.status(), 401);
    assert_eq!(none.headers()["www-authenticate"], "Bearer realm=\"metrics\"");
    assert!(!none.text().await.unwrap().contains("oauth_broker_"), "nothing leaks with the refusal");
    let wrong = http.get(app.url("/metrics")).bearer_auth("metrics-token-0123456789abcdeX").send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    let user_token = app.token_for(ALICE).await;
    assert_eq!(http.get(app.url("/metrics")).bearer_auth(user_token).send().await.unwrap().status(), 401);
    let page = scrape(&app).await;
    assert!(page.contains("oauth_broker_http_requests_total"));
    let build = format!("oauth_broker_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"));
    assert!(page.contains(&build), "the release is a label: {page}");
    app.stop().await;

    let off = crate::helpers::spawn_app(Backend::Sqlite).await.unwrap();
    let response = off.http().get(off.url("/metrics")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(response.status(), 404);
    assert!(response.text().await.unwrap().contains("metrics are off on this listener"));
    off.stop().await;
}

#[test]
fn a_metrics_token_shorter_than_16_characters_is_refused_at_start() {
    let args = oauth_broker::config::SettingsArgs::default();
    let error = oauth_broker::config::Config::from_toml(&args, "metrics_token = \"short\"\n").unwrap_err();
    assert!(format!("{error:#}").contains("metrics_token must be at least 16 characters"), "{error:#}");
    let error = oauth_broker::config::Config::from_toml(&args, "metrics_listen = \"nowhere\"\n").unwrap_err();
    assert!(format!("{error:#}").contains("metrics_listen"), "{error:#}");
    let error = oauth_broker::config::Config::from_toml(&args, "log_format = \"xml\"\n").unwrap_err();
    assert!(format!("{error:#}").contains("log_format"), "{error:#}");
}

// Issue 10: "optionally on a separate listen address" — there, and only there, without a token;
// the metrics address serves nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_on_their_own_address_are_served_there_and_only_there() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let options = SpawnOptions { toml: format!("metrics_listen = \"127.0.0.1:{port}\"\n"), ..Default::default() };
    let app = spawn_app_opts(Backend::Sqlite, options, |b| b).await.unwrap();
    let http = app.http();
    let metrics_url = format!("http://127.0.0.1:{port}/metrics");
    // The listener is bound as the app starts running: wait for it to answer.
    let answer =
        crate::helpers::eventually("the metrics address answers", std::time::Duration::from_secs(10), || async {
            http.get(&metrics_url).send().await
        })
        .await;
    assert_eq!(answer.status(), 200);
    assert!(answer.text().await.unwrap().contains("oauth_broker_"), "Prometheus text");
    let elsewhere = http.get(format!("http://127.0.0.1:{port}/mcp")).send().await.unwrap();
    assert_eq!(elsewhere.status(), 404, "the metrics address serves nothing else");
    let main = http.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(main.status(), 404, "not on the main listener");
    assert!(!main.text().await.unwrap().contains("oauth_broker_"));
    app.stop().await;
}
