//! A real webhook receiver for the tests: an axum server on port 0 that verifies every
//! delivery's Standard Webhooks signature with the secrets it was given (its own HMAC code, not
//! the broker's), answers what the test tells it to, and keeps what it accepted in arrival order.
//! Held ([`Receiver::hold`]), it keeps what it accepted but does not answer until released: an
//! instance killed then is "mid-delivery", with the event received but its outcome never
//! recorded.
//!
//! [`service_with_webhook`] registers a service whose webhook is such a receiver.

use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use oauth_broker::events::webhooks::signing::WebhookSecret;

use crate::helpers::TestApp;
use crate::helpers::eventually;
use crate::helpers::token_api::{ServiceCredentials, ServiceOptions, register_service};

/// One delivery the receiver accepted.
#[derive(Debug, Clone)]
pub struct Received {
    pub id: String,
    pub timestamp: i64,
    pub body: Value,
    pub raw: String,
    /// Every `v1,…` signature in the header.
    pub signatures: Vec<String>,
    pub at: Instant,
}

impl Received {
    pub fn event_type(&self) -> &str {
        self.body["type"].as_str().unwrap_or_default()
    }
}

struct Inner {
    secrets: Mutex<Vec<String>>,
    /// The status answered to a verified delivery (200 unless the test says otherwise).
    answer: AtomicU16,
    received: Mutex<Vec<Received>>,
    attempts: AtomicU64,
    unverified: AtomicU64,
    /// While true, accepted deliveries wait for it to turn false before answering.
    hold: tokio::sync::watch::Sender<bool>,
    /// Deliveries accepted while held (answered or not).
    held: AtomicU64,
}

pub struct Receiver {
    /// `http://127.0.0.1:PORT/hook`
    pub url: String,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

/// Whether `signature` (`v1,<base64>`) is the HMAC-SHA256 of `{id}.{timestamp}.{body}` under
/// `secret` (`whsec_<base64 key>`), as a receiver following Standard Webhooks checks it.
pub fn verify(secret: &str, id: &str, timestamp: i64, body: &str, signature: &str) -> bool {
    let Some(key) = secret.strip_prefix("whsec_").and_then(|k| STANDARD.decode(k).ok()) else { return false };
    let Some(given) = signature.strip_prefix("v1,").and_then(|s| STANDARD.decode(s).ok()) else { return false };
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    mac.verify_slice(&given).is_ok()
}

/// Whether any of the header's signatures verifies under any of `secrets`.
pub fn verify_any(secrets: &[String], id: &str, timestamp: i64, body: &str, signatures: &[String]) -> bool {
    secrets.iter().any(|secret| signatures.iter().any(|s| verify(secret, id, timestamp, body, s)))
}

async fn hook(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    inner.attempts.fetch_add(1, Ordering::SeqCst);
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let (id, timestamp) = (header("webhook-id"), header("webhook-timestamp").parse::<i64>().unwrap_or_default());
    let signatures: Vec<String> = header("webhook-signature").split(' ').map(str::to_owned).collect();
    let raw = String::from_utf8_lossy(&body).into_owned();
    let secrets = inner.secrets.lock().unwrap().clone();
    if !verify_any(&secrets, &id, timestamp, &raw, &signatures) {
        inner.unverified.fetch_add(1, Ordering::SeqCst);
        return StatusCode::UNAUTHORIZED;
    }
    let answer = StatusCode::from_u16(inner.answer.load(Ordering::SeqCst)).unwrap();
    if answer.is_success() {
        let body = serde_json::from_str(&raw).unwrap_or(Value::Null);
        inner.received.lock().unwrap().push(Received { id, timestamp, body, raw, signatures, at: Instant::now() });
        let mut hold = inner.hold.subscribe();
        if *hold.borrow_and_update() {
            inner.held.fetch_add(1, Ordering::SeqCst);
            // Dropped, not answered, if the sender is killed meanwhile.
            let _ = hold.wait_for(|held| !held).await;
        }
    }
    answer
}

impl Receiver {
    /// Listening, answering 200 to deliveries signed with `secret`.
    pub async fn start() -> Self {
        let inner = Arc::new(Inner {
            secrets: Mutex::default(),
            answer: AtomicU16::new(200),
            received: Mutex::default(),
            attempts: AtomicU64::default(),
            unverified: AtomicU64::default(),
            hold: tokio::sync::watch::Sender::new(false),
            held: AtomicU64::default(),
        });
        let router = axum::Router::new().route("/hook", axum::routing::post(hook)).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Self { url, inner, task }
    }

    /// The secrets it verifies with (replacing earlier ones).
    pub fn trust(&self, secrets: &[&str]) {
        *self.inner.secrets.lock().unwrap() = secrets.iter().map(|s| (*s).to_owned()).collect();
    }

    /// What it answers a verified delivery from now on (503: "down").
    pub fn answer(&self, status: u16) {
        self.inner.answer.store(status, Ordering::SeqCst);
    }

    /// From now on, accepts deliveries but answers none until [`Receiver::release`].
    pub fn hold(&self) {
        self.inner.hold.send_replace(true);
    }

    /// Answers the held deliveries (whose senders are still there) and every later one.
    pub fn release(&self) {
        self.inner.hold.send_replace(false);
    }

    /// Deliveries accepted while held.
    pub fn held(&self) -> u64 {
        self.inner.held.load(Ordering::SeqCst)
    }

    pub fn received(&self) -> Vec<Received> {
        self.inner.received.lock().unwrap().clone()
    }

    pub fn attempts(&self) -> u64 {
        self.inner.attempts.load(Ordering::SeqCst)
    }

    pub fn unverified(&self) -> u64 {
        self.inner.unverified.load(Ordering::SeqCst)
    }

    /// Waits until it accepted `count` deliveries; returns them.
    pub async fn wait_for(&self, count: usize) -> Vec<Received> {
        eventually(&format!("the receiver accepted {count} deliveries"), Duration::from_secs(30), || async {
            let got = self.received();
            if got.len() >= count {
                Ok(got)
            } else {
                Err(format!(
                    "{} so far: {:?}; {} attempts, {} with no valid signature",
                    got.len(),
                    got.iter().map(Received::event_type).collect::<Vec<_>>(),
                    self.attempts(),
                    self.unverified()
                ))
            }
        })
        .await
    }

    pub fn stop(self) {
        self.task.abort();
    }
}

/// Loopback receivers are private targets: the tests allow them, as an operator must.
pub const WEBHOOK_TOML: &str =
    "[webhooks]\nallow_private_targets = true\npoll_interval = \"100ms\"\nretry_window = \"2h\"\n";

/// What `admin services set-webhook` does, on the app's database: the signing secret.
pub async fn set_webhook(app: &TestApp, service_id: &str, url: &str) -> String {
    let secret = WebhookSecret::generate();
    let sealed = secret.seal(&app.state.core.sealer, service_id);
    assert!(app.state.core.store.webhooks().set(service_id, url, &sealed, app.now()).await.unwrap());
    secret.expose().to_owned()
}

/// A trusted service for `providers` whose webhook is `receiver`, which trusts its secret.
pub async fn service_with_webhook(
    app: &TestApp,
    name: &str,
    providers: &[&str],
    receiver: &Receiver,
) -> (ServiceCredentials, String) {
    let service = register_service(app, name, providers, ServiceOptions { trusted: true, ..Default::default() }).await;
    let secret = set_webhook(app, &service.client_id, &receiver.url).await;
    receiver.trust(&[&secret]);
    (service, secret)
}
