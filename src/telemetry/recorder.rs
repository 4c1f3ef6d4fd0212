//! The process-wide Prometheus recorder: installed once, its histogram buckets and the
//! description of every metric, and its text exposition for `/metrics`.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Latency buckets, seconds: a fast local answer to a slow provider.
const BUCKETS: [f64; 12] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
/// How often histograms are folded in when nobody scrapes.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Whether this process's Prometheus recorder is installed (a handle taken before would be the
/// facade's no-op one).
pub(super) fn installed() -> bool {
    HANDLE.get().is_some_and(Option::is_some)
}

/// Installs the recorder once per process (later calls reuse it). `None` when another
/// recorder was installed first (then `/metrics` says so).
pub fn install() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = match PrometheusBuilder::new().set_buckets(&BUCKETS) {
                Ok(builder) => builder,
                Err(error) => {
                    tracing::warn!(%error, "metrics: could not set histogram buckets");
                    PrometheusBuilder::new()
                }
            };
            match builder.install_recorder() {
                Ok(handle) => {
                    describe();
                    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                        let upkeep = handle.clone();
                        runtime.spawn(async move {
                            let mut every = tokio::time::interval(UPKEEP_EVERY);
                            loop {
                                every.tick().await;
                                upkeep.run_upkeep();
                            }
                        });
                    }
                    Some(handle)
                }
                Err(error) => {
                    tracing::warn!(%error, "metrics: another recorder is installed; /metrics stays empty");
                    None
                }
            }
        })
        .as_ref()
}

/// The Prometheus text exposition of every metric, or `None` without a recorder.
pub fn render() -> Option<String> {
    let handle = install()?;
    handle.run_upkeep();
    Some(handle.render())
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!("oauth_broker_http_requests_total", "HTTP requests answered, by route template and status.");
    describe_histogram!(
        "oauth_broker_http_request_duration_seconds",
        Unit::Seconds,
        "Time to the response head (a stream's life is not included)."
    );
    describe_counter!("oauth_broker_mcp_requests_total", "MCP JSON-RPC messages received, by method and tool.");
    describe_gauge!("oauth_broker_mcp_sessions_active", "MCP sessions open in this process.");
    describe_gauge!(
        "oauth_broker_mcp_sessions_parked",
        "Open MCP sessions parked: idle, without an rmcp service until their next message."
    );
    describe_counter!("oauth_broker_authorizations_total", "Connect attempts that ended, by outcome.");
    describe_counter!("oauth_broker_refreshes_total", "Token refreshes at providers, by provider and outcome.");
    describe_counter!("oauth_broker_upstream_requests_total", "Requests to providers, by provider, call and result.");
    describe_histogram!(
        "oauth_broker_upstream_duration_seconds",
        Unit::Seconds,
        "Time providers took to answer, by provider and call."
    );
    describe_counter!(
        "oauth_broker_gateway_calls_total",
        "Tool calls forwarded to servers behind the broker, by server and outcome."
    );
    describe_histogram!(
        "oauth_broker_gateway_call_duration_seconds",
        Unit::Seconds,
        "Time from a forwarded tool call's start to its answer, by server."
    );
    describe_gauge!(
        "oauth_broker_gateway_connections_open",
        "Users' connections to servers behind the broker this process holds (calls, questions and resource \
         subscriptions keep them; idle ones close)."
    );
    describe_counter!(
        "oauth_broker_gateway_retries_passed_on_total",
        "Retries this process passed on to the instance whose call waits for them, by outcome (the request is \
         also counted in oauth_broker_mcp_requests_total by both instances)."
    );
    describe_counter!("oauth_broker_token_api_answers_total", "Token-API answers to tool-server services, by answer.");
    describe_counter!("oauth_broker_audit_events_total", "Audit log entries written, by action and outcome.");
    describe_gauge!("oauth_broker_build_info", "Always 1; the `version` label says which release this process runs.");
    // Set once: which release answers, so a dashboard shows an upgrade rolling through.
    metrics::gauge!("oauth_broker_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
}
