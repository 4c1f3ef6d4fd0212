//! The browser leg of a connection, played by a cookie-keeping HTTP client, and the time from
//! the provider's redirect to our callback until the MCP client holds
//! `notifications/elicitation/complete`.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, CustomNotification, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, ErrorData, Implementation, UrlElicitationCapability,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// A URL-mode client that reports the links it is sent and when completions arrive.
struct Watcher {
    links: mpsc::UnboundedSender<String>,
    completions: mpsc::UnboundedSender<(String, Instant)>,
}

impl ClientHandler for Watcher {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::new().with_url(UrlElicitationCapability::default()));
        ClientConfig::new(capabilities, Implementation::new("mcp-bench", "1"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::UrlElicitationParams { url, .. } = request {
            let _ = self.links.send(url);
        }
        Ok(ElicitResult::new(ElicitationAction::Accept))
    }

    async fn on_custom_notification(&self, notification: CustomNotification, _ctx: NotificationContext<RoleClient>) {
        let at = Instant::now();
        if notification.method == "notifications/elicitation/complete"
            && let Some(id) = notification.params.as_ref().and_then(|p| p.get("elicitationId")).and_then(|v| v.as_str())
        {
            let _ = self.completions.send((id.to_owned(), at));
        }
    }
}

pub struct Flow {
    base: String,
    password: String,
    browser: reqwest::Client,
    client: RunningService<RoleClient, Watcher>,
    links: mpsc::UnboundedReceiver<String>,
    completions: mpsc::UnboundedReceiver<(String, Instant)>,
}

/// One connection's timings.
pub struct Timing {
    /// Callback request sent → completion notification at the client.
    pub to_notification: Duration,
    /// Callback request sent → its 303 answer: state and PKCE checks, the code exchange at the
    /// provider's token endpoint (the demo provider, in the broker's own process), sealing,
    /// storing and publishing the completion.
    pub callback_answered: Duration,
}

impl Flow {
    pub async fn start(base: &str, token: &str, password: &str) -> anyhow::Result<Self> {
        let (links_tx, links) = mpsc::unbounded_channel();
        let (done_tx, completions) = mpsc::unbounded_channel();
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp")).auth_header(token),
        );
        let client = Watcher { links: links_tx, completions: done_tx }.serve(transport).await?;
        let browser = reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()?;
        Ok(Self { base: base.to_owned(), password: password.to_owned(), browser, client, links, completions })
    }

    /// `connect_account` for the demo provider as `account`, approved in the browser; the
    /// tool call's answer and the timings.
    pub async fn connect(&mut self, account: &str) -> anyhow::Result<Timing> {
        let mut params = CallToolRequestParams::new("connect_account");
        params.arguments = json!({"provider": "demo", "account": account}).as_object().cloned();
        let peer = self.client.peer().clone();
        let call = tokio::spawn(async move { peer.call_tool(params).await });
        let link = tokio::time::timeout(Duration::from_secs(20), self.links.recv())
            .await
            .context("no URL elicitation")?
            .context("client gone")?;
        let callback = self.approve(&link, account).await?;
        let sent = Instant::now();
        let answered = self.browser.get(&callback).send().await?;
        let callback_answered = sent.elapsed();
        if answered.status() != 303 {
            bail!("callback: HTTP {}", answered.status());
        }
        let (_, at) = tokio::time::timeout(Duration::from_secs(20), self.completions.recv())
            .await
            .context("no completion notification")?
            .context("client gone")?;
        let result = call.await??;
        if result.is_error == Some(true) {
            bail!("connect_account failed: {result:?}");
        }
        Ok(Timing { to_notification: at.duration_since(sent), callback_answered })
    }

    /// Sign-in (first time), consent, and the demo provider's approval; returns the provider's
    /// redirect to our callback, not yet followed.
    async fn approve(&self, link: &str, account: &str) -> anyhow::Result<String> {
        let path = link.strip_prefix(&self.base).context("a connect link of ours")?;
        if self.browser.get(link).send().await?.status() == 303 {
            let page = self.browser.get(format!("{}/login?next={}", self.base, urlencode(path))).send().await?;
            let csrf = hidden_field(&page.text().await?, "csrf_token").context("login form")?;
            let form = [("username", "demo"), ("password", &self.password), ("next", path), ("csrf_token", &csrf)];
            let signed_in = self.browser.post(format!("{}/login", self.base)).form(&form).send().await?;
            if signed_in.status() != 303 {
                bail!("sign-in: HTTP {}", signed_in.status());
            }
        }
        let consent = self.browser.get(link).send().await?.text().await?;
        let csrf = hidden_field(&consent, "csrf_token").context("consent form")?;
        let approved =
            self.browser.post(link).form(&[("csrf_token", csrf.as_str()), ("action", "approve")]).send().await?;
        let provider = location(&approved).context("approve redirects to the provider")?;
        let page = self.browser.get(&provider).send().await?.text().await?;
        let mut form = hidden_fields(&page);
        form.retain(|(k, _)| k != "account" && k != "decision");
        form.push(("account".into(), account.into()));
        form.push(("decision".into(), "approve".into()));
        let answer = self.browser.post(format!("{}/demo-provider/authorize", self.base)).form(&form).send().await?;
        location(&answer).context("the demo provider redirects back")
    }

    pub async fn close(self) {
        let _ = self.client.cancel().await;
    }

    /// Calls `provider_request` once through the rmcp client (the grant is ready).
    pub async fn check_ready(&self, account: &str) -> anyhow::Result<Value> {
        let mut params = CallToolRequestParams::new("provider_request");
        params.arguments =
            json!({"provider": "demo", "method": "GET", "path": "/me", "account": account}).as_object().cloned();
        let result = self.client.peer().call_tool(params).await?;
        if result.is_error == Some(true) {
            bail!("provider_request failed: {result:?}");
        }
        Ok(result.structured_content.unwrap_or_default())
    }
}

fn location(response: &reqwest::Response) -> Option<String> {
    response.headers().get("location").and_then(|v| v.to_str().ok()).map(str::to_owned)
}

fn urlencode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

fn hidden_field(html: &str, name: &str) -> Option<String> {
    hidden_fields(html).into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

/// `<input name=… value=…>` pairs of a page.
fn hidden_fields(html: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for tag in html.split("<input").skip(1) {
        let tag = tag.split('>').next().unwrap_or_default();
        let attr = |attr: &str| {
            let key = format!("{attr}=\"");
            tag.find(&key).map(|i| {
                let rest = &tag[i + key.len()..];
                unescape(&rest[..rest.find('"').unwrap_or(rest.len())])
            })
        };
        if let (Some(name), Some(value)) = (attr("name"), attr("value")) {
            out.push((name, value));
        }
    }
    out
}

fn unescape(value: &str) -> String {
    value
        .replace("&#x2f;", "/")
        .replace("&#x2F;", "/")
        .replace("&#47;", "/")
        .replace("&quot;", "\"")
        .replace("&#34;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}
