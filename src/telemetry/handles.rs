//! Metric handles remembered by their labels. `metrics::counter!` with labels builds
//! a key (allocating its label values) and looks it up in the recorder's registry on every
//! call: about 1.5% of a `list_connections` call's instructions, twice per request. The hot
//! paths (every HTTP request, every MCP message) take their handles from here instead after
//! the first time. Label sets are closed (route templates, methods, status codes, the broker's
//! MCP methods and tools), so these maps stay small.
//!
//! Handles are remembered only once this process's Prometheus recorder is installed: one taken
//! before would be the facade's no-op handle, and would stay one.

use std::collections::HashMap;
use std::sync::{LazyLock, PoisonError, RwLock};

use metrics::{Counter, Histogram};

/// `oauth_broker_http_requests_total` and `oauth_broker_http_request_duration_seconds` of one
/// (method, status) pair, by route template.
type Routes = HashMap<Box<str>, (Counter, Histogram)>;

static HTTP: LazyLock<RwLock<HashMap<(&'static str, u16), Routes>>> = LazyLock::new(Default::default);
static MCP: LazyLock<RwLock<HashMap<(&'static str, &'static str), Counter>>> = LazyLock::new(Default::default);

fn recorder_installed() -> bool {
    super::recorder::installed()
}

/// Counts one HTTP answer and records its duration.
pub fn http_answered(method: &'static str, route: &str, status: u16, seconds: f64) {
    let record = |(counter, histogram): &(Counter, Histogram)| {
        counter.increment(1);
        histogram.record(seconds);
    };
    if recorder_installed() {
        let known = HTTP.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(handles) = known.get(&(method, status)).and_then(|routes| routes.get(route)) {
            return record(handles);
        }
    }
    let handles = (
        metrics::counter!("oauth_broker_http_requests_total",
            "method" => method, "route" => route.to_owned(), "status" => status.to_string()),
        metrics::histogram!("oauth_broker_http_request_duration_seconds", "method" => method, "route" => route.to_owned()),
    );
    record(&handles);
    if recorder_installed() {
        let mut known = HTTP.write().unwrap_or_else(PoisonError::into_inner);
        known.entry((method, status)).or_default().insert(route.into(), handles);
    }
}

/// Counts one MCP message under its (method, tool) labels.
pub fn mcp_counted(method: &'static str, tool: &'static str) {
    if recorder_installed() {
        let known = MCP.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(counter) = known.get(&(method, tool)) {
            return counter.increment(1);
        }
    }
    let counter = metrics::counter!("oauth_broker_mcp_requests_total", "method" => method, "tool" => tool);
    counter.increment(1);
    if recorder_installed() {
        MCP.write().unwrap_or_else(PoisonError::into_inner).insert((method, tool), counter);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of one series in the exposition, 0 when absent.
    fn value(text: &str, series: &str) -> f64 {
        text.lines().find_map(|line| line.strip_prefix(series)).and_then(|rest| rest.trim().parse().ok()).unwrap_or(0.0)
    }

    #[test]
    fn remembered_handles_count_under_their_own_labels_only() {
        assert!(super::super::install().is_some(), "this test process installs the recorder first");
        // Routes no real request has, so other tests in this process do not move them.
        for _ in 0..3 {
            http_answered("POST", "/test-handles/{a}", 200, 0.001);
        }
        http_answered("POST", "/test-handles/{a}", 404, 0.001);
        http_answered("GET", "/test-handles/{a}", 200, 0.001);
        http_answered("POST", "/test-handles/{b}", 200, 0.001);
        for _ in 0..2 {
            mcp_counted("tools/call", "test-handles-tool");
        }
        mcp_counted("ping", "test-handles-tool");

        let text = super::super::render().unwrap();
        let http = |method: &str, route: &str, status: u16| {
            value(
                &text,
                &format!(
                    "oauth_broker_http_requests_total{{method=\"{method}\",route=\"{route}\",status=\"{status}\"}}"
                ),
            )
        };
        assert_eq!(http("POST", "/test-handles/{a}", 200), 3.0, "{text}");
        assert_eq!(http("POST", "/test-handles/{a}", 404), 1.0, "{text}");
        assert_eq!(http("GET", "/test-handles/{a}", 200), 1.0, "{text}");
        assert_eq!(http("POST", "/test-handles/{b}", 200), 1.0, "{text}");
        let durations = "oauth_broker_http_request_duration_seconds_count{method=\"POST\",route=\"/test-handles/{a}\"}";
        assert_eq!(value(&text, durations), 4.0, "both statuses share the route's histogram\n{text}");
        let mcp = |method: &str| {
            value(&text, &format!("oauth_broker_mcp_requests_total{{method=\"{method}\",tool=\"test-handles-tool\"}}"))
        };
        assert_eq!(mcp("tools/call"), 2.0, "{text}");
        assert_eq!(mcp("ping"), 1.0, "{text}");
    }
}
