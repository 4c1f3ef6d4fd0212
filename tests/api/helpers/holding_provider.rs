//! A provider whose API holds a request until the test releases it, and the browser's leg
//! against it, for the tests of what a stop does to a call still waiting on its provider.

use std::sync::Arc;

use axum::extract::Query;
use axum::response::{IntoResponse, Redirect};
use axum::routing::{get, post};
use serde_json::json;
use tokio::sync::{Notify, mpsc};

use super::{hidden_field, location};

/// A provider whose API answers `/api/hold` only when the test releases it.
pub(crate) struct HoldingProvider {
    pub(crate) url: String,
    /// One message per request that reached `/api/hold`.
    pub(crate) arrived: mpsc::UnboundedReceiver<()>,
    /// One message per held request whose caller went away before the release.
    pub(crate) abandoned: mpsc::UnboundedReceiver<()>,
    pub(crate) release: Arc<Notify>,
}

impl HoldingProvider {
    /// The broker's `[providers.slow]` table for this provider.
    pub(crate) fn toml(&self) -> String {
        let p = &self.url;
        format!(
            "[providers.slow]\nauthorization_url = \"{p}/authorize\"\ntoken_url = \"{p}/token\"\nclient_id = \"broker\"\n\
             client_secret = \"secret\"\napi_base_url = \"{p}/api\"\nscopes = [\"read\"]\n"
        )
    }
}

/// Tells the test when a held request is dropped before it was released (hyper drops the
/// handler when its connection closes).
pub struct AbandonedSignal(Option<mpsc::UnboundedSender<()>>);

impl AbandonedSignal {
    /// The request was answered: nothing to tell.
    fn answered(&mut self) {
        self.0 = None;
    }
}

impl Drop for AbandonedSignal {
    fn drop(&mut self) {
        if let Some(abandoned) = self.0.take() {
            let _ = abandoned.send(());
        }
    }
}

pub(crate) async fn holding_provider() -> HoldingProvider {
    let (arrived_tx, arrived) = mpsc::unbounded_channel();
    let (abandoned_tx, abandoned) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let held = release.clone();
    let app = axum::Router::new()
        // Approves at once: back to the broker's callback with a code and the state.
        .route(
            "/authorize",
            get(|Query(q): Query<std::collections::HashMap<String, String>>| async move {
                let back = format!("{}?code=the-code&state={}", q["redirect_uri"], q["state"]);
                Redirect::to(&back)
            }),
        )
        .route(
            "/token",
            post(|| async {
                axum::Json(json!({"access_token": "at-1", "token_type": "Bearer", "expires_in": 3600, "refresh_token": "rt-1", "scope": "read"}))
            }),
        )
        .route(
            "/api/hold",
            get(move || {
                let (arrived, held) = (arrived_tx.clone(), held.clone());
                let mut abandoned = AbandonedSignal(Some(abandoned_tx.clone()));
                async move {
                    let _ = arrived.send(());
                    held.notified().await;
                    abandoned.answered();
                    axum::Json(json!({"held": "released"})).into_response()
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    HoldingProvider { url, arrived, abandoned, release }
}

/// Signs in as `user` and approves the connect link; the provider approves at once.
pub(crate) async fn connect_in_browser(base: &str, connect_url: &str, user: &str, password: &str) {
    let browser =
        reqwest::Client::builder().cookie_store(true).redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let path = connect_url.strip_prefix(base).unwrap();
    let login = browser.get(format!("{base}/login?next={path}")).send().await.unwrap().text().await.unwrap();
    let csrf = hidden_field(&login, "csrf_token").unwrap();
    let signed_in = browser
        .post(format!("{base}/login"))
        .form(&[("username", user), ("password", password), ("next", path), ("csrf_token", &csrf)])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 303);
    let consent = browser.get(connect_url).send().await.unwrap().text().await.unwrap();
    let csrf = hidden_field(&consent, "csrf_token").unwrap();
    let approved =
        browser.post(connect_url).form(&[("csrf_token", csrf.as_str()), ("action", "approve")]).send().await.unwrap();
    let at_provider = browser.get(location(&approved)).send().await.unwrap();
    let callback = browser.get(location(&at_provider)).send().await.unwrap();
    assert!(callback.status().is_success() || callback.status().is_redirection(), "{}", callback.status());
}
