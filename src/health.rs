//! `/healthz` and `/readyz`, for orchestrators and load balancers.
//!
//! `/healthz` says the process runs and answers HTTP: nothing else is looked at, so a slow
//! database never gets a live process restarted. `/readyz` says whether this instance should be
//! sent traffic now: the database answers within [`READY_DATABASE_BOUND`], every migration this
//! binary knows is applied (an instance started against an older schema, or beside a failed
//! migration, must not serve), and the process is not draining after a stop signal (so a load
//! balancer moves new connections elsewhere while in-flight work finishes). The sealing and
//! signing keys are loaded before the listener opens (`startup`), so a serving process has them;
//! the answer says so for completeness. The body names each check and never carries an error's
//! text (a database error can hold a host name or a user).

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::state::AppState;

/// A readiness probe must answer well before the prober gives up (Kubernetes: 1 s by default
/// is common, often raised to a few): a database slower than this counts as not ready.
pub const READY_DATABASE_BOUND: Duration = Duration::from_secs(2);

/// `GET /healthz`: alive.
pub async fn healthz() -> &'static str {
    "ok"
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Readiness {
    pub ready: bool,
    /// The release this process runs (`oauth-broker --version`), so a rolling upgrade can be
    /// followed instance by instance.
    pub version: &'static str,
    /// `ok`, `unavailable` or `timeout`.
    pub database: &'static str,
    /// `ok`, `pending` (a known migration is not applied), `failed` (one is marked failed) or
    /// `unknown` (the database did not answer).
    pub migrations: &'static str,
    pub keys: &'static str,
    pub draining: bool,
}

/// Looks at each condition; never fails itself.
pub async fn readiness(state: &AppState) -> Readiness {
    let draining = state.draining.is_cancelled();
    let (database, migrations) =
        match tokio::time::timeout(READY_DATABASE_BOUND, state.core.store.applied_migrations()).await {
            Err(_) => ("timeout", "unknown"),
            Ok(Err(error)) => {
                tracing::warn!(%error, "readiness: the database did not answer");
                ("unavailable", "unknown")
            }
            Ok(Ok(applied)) => {
                let migrations = if applied.iter().any(|m| !m.success) {
                    "failed"
                } else if state
                    .core
                    .store
                    .known_migrations()
                    .iter()
                    .all(|(version, _)| applied.iter().any(|m| m.version == *version))
                {
                    "ok"
                } else {
                    "pending"
                };
                ("ok", migrations)
            }
        };
    Readiness {
        ready: !draining && database == "ok" && migrations == "ok",
        version: env!("CARGO_PKG_VERSION"),
        database,
        migrations,
        keys: "loaded",
        draining,
    }
}

/// `GET /readyz`: 200 when ready, else 503; the JSON body says which check failed.
pub async fn readyz(State(state): State<AppState>) -> Response {
    let readiness = readiness(&state).await;
    let status = if readiness.ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, [(axum::http::header::CACHE_CONTROL, "no-store")], Json(readiness)).into_response()
}
