//! An MCP server to put behind the broker (gateway mode, issue 26): rmcp over Streamable HTTP,
//! its own process, written as if the broker did not exist.
//!
//! - `--require-bearer <demo-provider-base-url>`: every request needs `Authorization: Bearer
//!   <token>`, checked by calling the demo provider's `/api/me` with it; without one, or with
//!   one the provider refuses, the answer is 401 with `WWW-Authenticate: Bearer`.
//! - `--secret-header NAME` (with the value in `UPSTREAM_SECRET`): every request needs that
//!   header with that value (an operator's API key), else 401.
//! - `--require-oauth <issuer>`: protected by MCP authorization (2025-11-25
//!   basic/authorization), with `<issuer>` (e.g. an oauth-broker's public URL) as its
//!   authorization server. It serves its protected-resource metadata (RFC 9728) at
//!   `/.well-known/oauth-protected-resource/mcp`, answers a request without a valid token with
//!   401 and `WWW-Authenticate: Bearer resource_metadata="…"`, and accepts only JWT access
//!   tokens signed by a key in the issuer's JWKS, from that issuer, for its own URL as audience
//!   (RFC 8707 `resource`). The issuer must know this server as a resource (an oauth-broker:
//!   `admin services add … --resource http://ADDR/mcp`).
//!
//! Tools: `whoami` (which demo-provider account the request's token belongs to, and a short
//! SHA-256 prefix of the credential it received — never the credential), `echo`, `count`
//! (sends a progress notification per step), `log` (sends `notifications/message` at debug,
//! info and warning, logger `worker`, whatever level was set), `slow` (waits until cancelled, or ten minutes),
//! `ask_name` (asks the client a form question, `elicitation/create` in form mode, and answers
//! with what the user did), `open_page` (asks the client to open `url` by URL elicitation and,
//! once the user accepted, sends `notifications/elicitation/complete`), `add_note` (adds a
//! resource `note://notes/{title}` and a prompt `note_{title}` for everyone, and sends
//! `notifications/resources/list_changed` and `notifications/prompts/list_changed`),
//! `ask_two` (a form question, then a URL elicitation, in one call), `needs_page` (answers
//! `-32042` with a page of its own at `url` until that page is done, then says so) and
//! `complete_pages` (marks the pages `needs_page` handed out done and sends
//! `notifications/elicitation/complete` for each), `touch` (sends
//! `notifications/resources/updated` for `uri` to the sessions subscribed to it) and
//! `subscribers` (how many sessions are subscribed to `uri`). It offers `resources/subscribe`.
//! When a question is answered the server
//! prints `elicitation answered: <action>`; when it gets an error instead, `elicitation
//! refused: <message>`, and answers with the error in its result.
//!
//! Prompts: `greeting` (argument `name`; its message names the caller's account), `introduce`
//! (asks the client the form question of `ask_name` while it is being got, and names who was
//! given). Resources: `note://whoami` (the caller's account and credential hash, as `whoami`
//! answers), `note://asked` (asks the same question while it is being read),
//! `note://vendor` (read, it answers `-32042` with a page of its own at
//! `https://vendor.example/notes` until `complete_pages` marks that page done), the template
//! `note://echo/{text}` (its text, as read), the notes `add_note` made, and the caller's own
//! `note://inbox/{account}` (listed to, and read by, that account only).
//!
//! It speaks the 2025-11-25 revision only (sessions): `server/discover` is answered
//! "unsupported protocol version", so the broker opens a session with it.
//!
//! `cargo run --example upstream_server -- --listen 127.0.0.1:9400 --require-bearer
//! http://127.0.0.1:8080/demo-provider` prints `listening on http://ADDR` first. `whoami`
//! names the token's `sub` as the account under `--require-oauth`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use clap::Parser;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomNotification, ElicitRequestParams,
    ElicitResult, ElicitationAction, ErrorData, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, Prompt, PromptArgument, PromptMessage, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate, Role, ServerCapabilities, ServerConfig,
    ServerNotification, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

#[derive(Parser)]
#[command(about = "An MCP server that checks a demo-provider bearer token or a secret header on every request")]
struct Args {
    /// Address to listen on; port 0 picks a free one (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The demo provider's base URL (e.g. http://127.0.0.1:8080/demo-provider): every request's
    /// bearer token is checked at its /api/me.
    #[arg(long)]
    require_bearer: Option<String>,
    /// Require this header, with the value of the environment variable UPSTREAM_SECRET.
    #[arg(long)]
    secret_header: Option<String>,
    /// Require MCP authorization with this issuer as the authorization server (its RFC 8414
    /// metadata names the JWKS the access tokens are checked with).
    #[arg(long)]
    require_oauth: Option<String>,
}

/// How each request is checked.
#[derive(Clone)]
enum Check {
    Open,
    Bearer { me_url: String, http: reqwest::Client },
    Secret { header: String, value: String },
    Oauth(Arc<OauthCheck>),
}

/// `--require-oauth`: who may sign, for whom, and where the metadata is.
struct OauthCheck {
    issuer: String,
    /// This server's URL: the only audience accepted, and the metadata's `resource`.
    resource: String,
    metadata_url: String,
    keys: jsonwebtoken::jwk::JwkSet,
}

impl OauthCheck {
    async fn load(issuer: &str, base: &str) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build()?;
        let metadata_url = format!("{}/.well-known/oauth-authorization-server", issuer.trim_end_matches('/'));
        let metadata: Value = http.get(&metadata_url).send().await?.error_for_status()?.json().await?;
        let jwks_uri =
            metadata["jwks_uri"].as_str().ok_or_else(|| anyhow::anyhow!("{metadata_url} names no jwks_uri"))?;
        let keys = http.get(jwks_uri).send().await?.error_for_status()?.json().await?;
        let issuer = metadata["issuer"].as_str().unwrap_or(issuer).to_owned();
        Ok(Self {
            issuer,
            resource: format!("{base}/mcp"),
            metadata_url: format!("{base}/.well-known/oauth-protected-resource/mcp"),
            keys,
        })
    }

    /// The token's `sub`, if the token is signed by the issuer's key, from the issuer, for
    /// this server and unexpired.
    fn subject(&self, token: &str) -> Option<String> {
        let header = jsonwebtoken::decode_header(token).ok()?;
        let jwk = self.keys.find(header.kid.as_deref()?)?;
        let key = jsonwebtoken::DecodingKey::from_jwk(jwk).ok()?;
        let mut validation = jsonwebtoken::Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.resource]);
        let claims = jsonwebtoken::decode::<Value>(token, &key, &validation).ok()?.claims;
        claims["sub"].as_str().map(str::to_owned)
    }

    /// RFC 9728 §5.1: where a client finds how to get a token.
    fn challenge(&self, error: Option<&str>) -> Response {
        let mut value = format!("Bearer resource_metadata=\"{}\"", self.metadata_url);
        if let Some(error) = error {
            value.push_str(&format!(", error=\"{error}\""));
        }
        (http::StatusCode::UNAUTHORIZED, [(http::header::WWW_AUTHENTICATE, value)], "unauthorized").into_response()
    }
}

/// Who the request's credential says the caller is (put in the request's extensions; rmcp
/// hands the HTTP parts to the tool through its context).
#[derive(Clone)]
struct Caller {
    account: Option<String>,
    credential_sha256: String,
}

fn short_hash(value: &str) -> String {
    hex::encode(Sha256::digest(value.as_bytes()))[..12].to_owned()
}

fn unauthorized() -> Response {
    (http::StatusCode::UNAUTHORIZED, [(http::header::WWW_AUTHENTICATE, "Bearer")], "unauthorized").into_response()
}

async fn authenticate(State(check): State<Check>, mut request: Request, next: Next) -> Response {
    // Read before any await: a request body is not `Sync`, so no borrow of it may cross one.
    let header = {
        let headers = request.headers().clone();
        move |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
    };
    let caller = match &check {
        Check::Open => Caller { account: None, credential_sha256: String::new() },
        Check::Secret { header: name, value } => match header(name) {
            Some(given) if given == *value => Caller { account: None, credential_sha256: short_hash(&given) },
            _ => return unauthorized(),
        },
        Check::Bearer { me_url, http } => {
            let Some(token) = header("authorization").and_then(|v| v.strip_prefix("Bearer ").map(str::to_owned)) else {
                return unauthorized();
            };
            let Ok(answer) = http.get(me_url).bearer_auth(&token).send().await else { return unauthorized() };
            if !answer.status().is_success() {
                return unauthorized();
            }
            let me: Value = answer.json().await.unwrap_or_default();
            let account = me["account"].as_str().map(str::to_owned);
            Caller { account, credential_sha256: short_hash(&token) }
        }
        Check::Oauth(oauth) => {
            let Some(token) = header("authorization").and_then(|v| v.strip_prefix("Bearer ").map(str::to_owned)) else {
                return oauth.challenge(None);
            };
            // Not for this server (another audience), expired, or not the issuer's: refused.
            let Some(subject) = oauth.subject(&token) else { return oauth.challenge(Some("invalid_token")) };
            Caller { account: Some(subject), credential_sha256: short_hash(&token) }
        }
    };
    request.extensions_mut().insert(caller);
    next.run(request).await
}

#[derive(Clone)]
struct Upstream {
    tools: Arc<Vec<Tool>>,
    /// The titles `add_note` added, shared by every session (lists are the same for everyone).
    notes: Arc<std::sync::Mutex<Vec<String>>>,
    /// The pages `needs_page` asked for: (elicitation id, URL) still open, and the URLs done.
    pages: Arc<std::sync::Mutex<Pages>>,
    /// `resources/subscribe`: each subscription's URI, its session's id and that session's peer.
    subscribers: Arc<std::sync::Mutex<Vec<Subscriber>>>,
}

struct Subscriber {
    uri: String,
    session: String,
    peer: rmcp::Peer<RoleServer>,
}

/// The `Mcp-Session-Id` a request came with.
fn session_of(ctx: &RequestContext<RoleServer>) -> String {
    let parts = ctx.extensions.get::<http::request::Parts>();
    let header = parts.and_then(|parts| parts.headers.get("mcp-session-id"));
    header.and_then(|value| value.to_str().ok()).unwrap_or_default().to_owned()
}

#[derive(Default)]
struct Pages {
    open: Vec<(String, String)>,
    done: Vec<String>,
}

impl Upstream {
    fn notes(&self) -> Vec<String> {
        self.notes.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn subscribers(&self) -> std::sync::MutexGuard<'_, Vec<Subscriber>> {
        self.subscribers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `None` once the page at `url` is done; until then the `-32042` that sends the user to it
    /// (MCP 2025-11-25 client/elicitation §URL mode, URLElicitationRequiredError).
    fn page_needed(&self, url: &str) -> Option<ErrorData> {
        let mut pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        if pages.done.iter().any(|done| done == url) {
            return None;
        }
        let id = format!("upstream-page-{}", uuid::Uuid::new_v4());
        pages.open.push((id.clone(), url.to_owned()));
        let data = json!({"elicitations": [{
            "mode": "url", "elicitationId": id, "url": url, "message": "Sign in to the vendor first.",
        }]});
        Some(ErrorData::new(rmcp::model::ErrorCode(-32042), "Open the vendor's page first.", Some(data)))
    }
}

/// The page reading `note://vendor` needs done first.
const VENDOR_NOTE_PAGE: &str = "https://vendor.example/notes";

/// Who called, from the HTTP parts rmcp hands over.
fn caller(ctx: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("no caller", None))
}

fn text_resource(uri: &str, text: String) -> ReadResourceResult {
    ReadResourceResult::new(vec![ResourceContents::text(text, uri)])
}

fn schema(value: Value) -> Arc<rmcp::model::JsonObject> {
    Arc::new(value.as_object().cloned().unwrap_or_default())
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "whoami",
            "Which demo-provider account the credential this server received belongs to",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "echo",
            "Echoes its text",
            schema(
                json!({"type": "object", "properties": {"text": {"type": "string", "maxLength": 1000}}, "required": ["text"]}),
            ),
        ),
        Tool::new(
            "count",
            "Counts to n, with a progress notification per step",
            schema(
                json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 100}}, "required": ["n"]}),
            ),
        ),
        Tool::new(
            "log",
            "Sends a log message at debug, one at info and one at warning, then answers",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "slow",
            "Waits until cancelled (or ten minutes)",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "ask_name",
            "Asks the user's name in a form and answers with what the user did",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "open_page",
            "Asks the user to open a page (URL elicitation), then says the page is done",
            schema(
                json!({"type": "object", "properties": {"url": {"type": "string", "maxLength": 2000}}, "required": ["url"]}),
            ),
        ),
        Tool::new(
            "touch",
            "Tells the sessions subscribed to the resource uri that it changed",
            schema(
                json!({"type": "object", "properties": {"uri": {"type": "string", "maxLength": 2000}}, "required": ["uri"]}),
            ),
        ),
        Tool::new(
            "subscribers",
            "How many sessions are subscribed to the resource uri",
            schema(
                json!({"type": "object", "properties": {"uri": {"type": "string", "maxLength": 2000}}, "required": ["uri"]}),
            ),
        ),
        Tool::new(
            "ask_two",
            "Asks the user's name in a form, then to open a page, in one call",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "needs_page",
            "Answers -32042 with a page of its own at url until that page is done",
            schema(
                json!({"type": "object", "properties": {"url": {"type": "string", "maxLength": 2000}}, "required": ["url"]}),
            ),
        ),
        Tool::new(
            "complete_pages",
            "Marks the pages needs_page handed out done and says so to the client",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "add_note",
            "Adds a note (a resource and a prompt) and tells clients the lists changed",
            schema(
                json!({"type": "object", "properties": {"title": {"type": "string", "pattern": "^[a-z0-9]{1,20}$"}}, "required": ["title"]}),
            ),
        ),
    ]
}

fn structured(value: Value) -> CallToolResponse {
    let mut result = CallToolResult::structured(value.clone());
    result.content = vec![ContentBlock::text(value.to_string())];
    result.into()
}

impl ServerHandler for Upstream {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .build();
        // `log` sends notifications/message (MCP 2025-11-25 server/utilities/logging).
        capabilities.logging = Some(Default::default());
        ServerConfig::new(capabilities)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let greeting = Prompt::new(
            "greeting",
            Some("Greets someone on behalf of the caller's account"),
            Some(vec![PromptArgument::new("name").with_description("Who to greet").with_required(true)]),
        );
        let introduce = Prompt::new("introduce", Some("Asks who to introduce, then introduces them"), None);
        let mut prompts = vec![greeting, introduce];
        prompts.extend(self.notes().iter().map(|title| Prompt::new(format!("note_{title}"), Some("A note"), None)));
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let caller = caller(&ctx)?;
        let account = caller.account.unwrap_or_else(|| "nobody".into());
        let text = match request.name.as_str() {
            "greeting" => {
                let name = request.arguments.as_ref().and_then(|a| a.get("name")).and_then(Value::as_str);
                let Some(name) = name else { return Err(ErrorData::invalid_params("name is required", None)) };
                format!("Greet {name} on behalf of {account}.")
            }
            "introduce" => format!("Introduce {} on behalf of {account}.", name_asked_within(&ctx).await?),
            other => match other.strip_prefix("note_").filter(|t| self.notes().iter().any(|n| n == t)) {
                Some(title) => format!("The note {title}, for {account}."),
                None => return Err(ErrorData::invalid_params(format!("unknown prompt: {other}"), None)),
            },
        };
        let message = PromptMessage::new_text(Role::User, text);
        Ok(GetPromptResult::new(vec![message]).with_description("A greeting").into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut resources = vec![
            Resource::new("note://whoami", "whoami").with_mime_type("application/json"),
            Resource::new("note://vendor", "vendor"),
            Resource::new("note://asked", "asked"),
        ];
        // The caller's own: listed to that account only.
        if let Some(account) = caller(&ctx)?.account {
            resources.push(Resource::new(format!("note://inbox/{account}"), format!("{account}'s inbox")));
        }
        for title in self.notes() {
            resources.push(Resource::new(format!("note://notes/{title}"), title));
        }
        Ok(ListResourcesResult::with_all_items(resources))
    }

    // MCP 2025-11-25 server/resources §Subscriptions: `touch` tells the subscribed sessions.
    #[allow(deprecated, reason = "resources/subscribe is what a 2025-11-25 server speaks")]
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let session = session_of(&ctx);
        let mut subscribers = self.subscribers();
        if !subscribers.iter().any(|s| s.uri == request.uri && s.session == session) {
            subscribers.push(Subscriber { uri: request.uri, session, peer: ctx.peer });
        }
        Ok(())
    }

    #[allow(deprecated, reason = "resources/unsubscribe is what a 2025-11-25 server speaks")]
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let session = session_of(&ctx);
        self.subscribers().retain(|s| !(s.uri == request.uri && s.session == session));
        Ok(())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let echo = ResourceTemplate::new("note://echo/{text}", "echo");
        Ok(ListResourceTemplatesResult::with_all_items(vec![echo]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = caller(&ctx)?;
        let uri = request.uri.as_str();
        let text = if uri == "note://whoami" {
            json!({"account": caller.account, "credential_sha256": caller.credential_sha256}).to_string()
        } else if let Some(text) = uri.strip_prefix("note://echo/") {
            text.to_owned()
        } else if uri == "note://asked" {
            format!("Hello, {}.", name_asked_within(&ctx).await?)
        } else if uri == "note://vendor" {
            if let Some(error) = self.page_needed(VENDOR_NOTE_PAGE) {
                return Err(error);
            }
            "The vendor's note.".to_owned()
        } else if let Some(account) =
            uri.strip_prefix("note://inbox/").filter(|a| caller.account.as_deref() == Some(*a))
        {
            format!("The inbox of {account}.")
        } else if let Some(title) = uri.strip_prefix("note://notes/").filter(|t| self.notes().iter().any(|n| n == t)) {
            format!("The note {title}.")
        } else {
            return Err(ErrorData::resource_not_found(format!("no such note: {uri}"), None));
        };
        Ok(text_resource(uri, text).into())
    }

    // A 2025-11-25 server, as many still are: its questions are requests of its own mid-call,
    // which the stateless 2026-07-28 revision has no room for. `server/discover` (2026-07-28)
    // is answered "unsupported version", and a client falls back to `initialize`.
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [rmcp::model::ProtocolVersion]> {
        std::borrow::Cow::Borrowed(rmcp::model::ProtocolVersion::known_up_to(
            &rmcp::model::ProtocolVersion::V_2025_11_25,
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult { tools: self.tools.as_ref().clone(), ..Default::default() })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.clone().unwrap_or_default();
        match request.name.as_ref() {
            "whoami" => {
                let caller = caller(&ctx)?;
                Ok(structured(json!({"account": caller.account, "credential_sha256": caller.credential_sha256})))
            }
            "echo" => Ok(structured(json!({"text": arguments.get("text").cloned().unwrap_or_default()}))),
            "count" => {
                let n = arguments.get("n").and_then(Value::as_u64).unwrap_or(1);
                if let Some(token) = ctx.meta.get_progress_token() {
                    for step in 1..=n {
                        let note = ProgressNotificationParam::new(token.clone(), step as f64).with_total(n as f64);
                        let _ = ctx.peer.notify_progress(note).await;
                    }
                }
                Ok(structured(json!({"counted": n})))
            }
            "log" => {
                log_three(&ctx).await;
                Ok(structured(json!({"logged": 3})))
            }
            "slow" => {
                // Tests wait for this line before they stop the server mid-call.
                println!("slow started");
                tokio::select! {
                    _ = ctx.ct.cancelled() => Err(ErrorData::internal_error("cancelled", None)),
                    _ = tokio::time::sleep(Duration::from_secs(600)) => Ok(structured(json!({"slept": 600}))),
                }
            }
            "ask_name" => Ok(answered(ctx.peer.create_elicitation(name_question()?).await, None)),
            "ask_two" => {
                let first = answered(ctx.peer.create_elicitation(name_question()?).await, None);
                let question = ElicitRequestParams::UrlElicitationParams {
                    meta: None,
                    message: "Now sign in to the vendor.".into(),
                    url: "https://login.vendor.example/two".into(),
                    elicitation_id: format!("upstream-{}", uuid::Uuid::new_v4()),
                };
                let second = answered(ctx.peer.create_elicitation(question).await, None);
                let part = |answer: CallToolResponse| match answer {
                    CallToolResponse::Complete(result) => result.structured_content.unwrap_or_default(),
                    _ => Value::Null,
                };
                Ok(structured(json!({"first": part(first), "second": part(second)})))
            }
            "needs_page" => {
                let url = arguments.get("url").and_then(Value::as_str).unwrap_or_default().to_owned();
                match self.page_needed(&url) {
                    Some(error) => Err(error),
                    None => Ok(structured(json!({"opened": url}))),
                }
            }
            "complete_pages" => {
                let open = {
                    let mut pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
                    let open = std::mem::take(&mut pages.open);
                    pages.done.extend(open.iter().map(|(_, url)| url.clone()));
                    open
                };
                for (id, _) in &open {
                    let complete = CustomNotification::new(
                        "notifications/elicitation/complete",
                        Some(json!({"elicitationId": id})),
                    );
                    let _ = ctx.peer.send_notification(ServerNotification::CustomNotification(complete)).await;
                }
                Ok(structured(json!({"completed": open.len()})))
            }
            "open_page" => {
                let url = arguments.get("url").and_then(Value::as_str).unwrap_or_default().to_owned();
                let id = format!("upstream-{}", uuid::Uuid::new_v4());
                let question = ElicitRequestParams::UrlElicitationParams {
                    meta: None,
                    message: "Sign in to the vendor to continue.".into(),
                    url,
                    elicitation_id: id.clone(),
                };
                let asked = ctx.peer.create_elicitation(question).await;
                if asked.as_ref().is_ok_and(|r| r.action == ElicitationAction::Accept) {
                    // The page is "done" at once: MCP 2025-11-25 client/elicitation §URL mode,
                    // completion notification.
                    let complete = CustomNotification::new(
                        "notifications/elicitation/complete",
                        Some(json!({"elicitationId": id})),
                    );
                    let _ = ctx.peer.send_notification(ServerNotification::CustomNotification(complete)).await;
                }
                Ok(answered(asked, Some(&id)))
            }
            "touch" => {
                let uri = arguments.get("uri").and_then(Value::as_str).unwrap_or_default().to_owned();
                let peers: Vec<_> =
                    self.subscribers().iter().filter(|s| s.uri == uri).map(|s| s.peer.clone()).collect();
                for peer in &peers {
                    let updated = rmcp::model::ResourceUpdatedNotificationParam::new(uri.clone());
                    let _ = peer.notify_resource_updated(updated).await;
                }
                Ok(structured(json!({"notified": peers.len()})))
            }
            "subscribers" => {
                let uri = arguments.get("uri").and_then(Value::as_str).unwrap_or_default();
                Ok(structured(json!({"sessions": self.subscribers().iter().filter(|s| s.uri == uri).count()})))
            }
            "add_note" => {
                let title = arguments.get("title").and_then(Value::as_str).unwrap_or_default().to_owned();
                self.notes.lock().unwrap_or_else(|p| p.into_inner()).push(title.clone());
                let _ = ctx.peer.notify_resource_list_changed().await;
                let _ = ctx.peer.notify_prompt_list_changed().await;
                Ok(structured(json!({"added": title})))
            }
            other => Err(ErrorData::invalid_params(format!("unknown tool: {other}"), None)),
        }
    }
}

/// The form `ask_name` asks.
fn name_question() -> Result<ElicitRequestParams, ErrorData> {
    let form = serde_json::from_value(json!({
        "type": "object",
        "properties": {"name": {"type": "string", "title": "Your name"}},
        "required": ["name"],
    }))
    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: "What should I call you?".into(),
        requested_schema: form,
    })
}

/// `log`'s messages: one at debug, one at info, one at warning, on the call's own stream (as
/// related to the call: without that, rmcp's server sends them on the session's GET stream,
/// where they may arrive after the call's answer).
// `notifications/message` is deprecated by SEP-2577 (2026-07-28); this server speaks 2025-11-25.
#[allow(deprecated)]
async fn log_three(ctx: &RequestContext<RoleServer>) {
    use rmcp::model::{LoggingLevel, LoggingMessageNotification, LoggingMessageNotificationParam};
    for (level, text) in
        [(LoggingLevel::Debug, "details"), (LoggingLevel::Info, "working"), (LoggingLevel::Warning, "careful")]
    {
        let mut message = LoggingMessageNotificationParam::new(level, json!(text));
        message.logger = Some("worker".into());
        let mut note = LoggingMessageNotification::new(message);
        note.extensions.insert(rmcp::service::OriginatingRequestId(ctx.id.clone()));
        let _ = ctx.peer.send_notification(ServerNotification::LoggingMessageNotification(note)).await;
    }
}

/// Asks `ask_name`'s question within a request that is not a tool call (a prompt, a read): the
/// name given, or what the user did instead in brackets. Printed as `answered` prints it; an
/// error instead of an answer fails the request with it.
async fn name_asked_within(ctx: &RequestContext<RoleServer>) -> Result<String, ErrorData> {
    let asked = ctx.peer.create_elicitation(name_question()?).await;
    let action = print_answer(&asked).map_err(|(_, message)| {
        ErrorData::invalid_request(format!("the question could not be asked: {message}"), None)
    })?;
    let name = asked
        .ok()
        .filter(|result| matches!(result.action, ElicitationAction::Accept))
        .and_then(|result| result.content?.get("name")?.as_str().map(str::to_owned));
    Ok(name.unwrap_or_else(|| format!("({action})")))
}

/// What the user did with a question, or the error the server got instead.
fn answered(asked: Result<ElicitResult, rmcp::ServiceError>, elicitation_id: Option<&str>) -> CallToolResponse {
    let printed = print_answer(&asked);
    match asked {
        Ok(result) => structured(json!({
            "action": result.action,
            "content": result.content,
            "elicitationId": elicitation_id,
        })),
        Err(_) => {
            let (code, message) = printed.err().unwrap_or_default();
            structured(json!({"error": {"code": code, "message": message}}))
        }
    }
}

/// Prints what the server was answered (`elicitation answered: ACTION`) or told instead
/// (`elicitation refused: MESSAGE`) — tests wait for these lines — and returns the action, or
/// the error's code and message.
fn print_answer(asked: &Result<ElicitResult, rmcp::ServiceError>) -> Result<String, (i32, String)> {
    match asked {
        Ok(result) => {
            let action = json!(result.action).as_str().unwrap_or_default().to_owned();
            println!("elicitation answered: {action}");
            Ok(action)
        }
        Err(error) => {
            let (code, message) = match error {
                rmcp::ServiceError::McpError(e) => (e.code.0, e.message.to_string()),
                other => (0, other.to_string()),
            };
            println!("elicitation refused: {message}");
            Err((code, message))
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let base = format!("http://{}", listener.local_addr()?);
    let check = match (&args.require_bearer, &args.secret_header) {
        _ if args.require_bearer.is_some() as u8
            + args.secret_header.is_some() as u8
            + args.require_oauth.is_some() as u8
            > 1 =>
        {
            anyhow::bail!("--require-bearer, --secret-header and --require-oauth: choose one")
        }
        _ if args.require_oauth.is_some() => {
            let issuer = args.require_oauth.as_deref().unwrap_or_default();
            Check::Oauth(Arc::new(OauthCheck::load(issuer, &base).await?))
        }
        (Some(base), None) => Check::Bearer {
            me_url: format!("{}/api/me", base.trim_end_matches('/')),
            http: reqwest::Client::builder().timeout(Duration::from_secs(10)).build()?,
        },
        (None, Some(header)) => Check::Secret {
            header: header.to_ascii_lowercase(),
            value: std::env::var("UPSTREAM_SECRET")
                .map_err(|_| anyhow::anyhow!("--secret-header needs UPSTREAM_SECRET"))?,
        },
        (None, None) => Check::Open,
        (Some(_), Some(_)) => anyhow::bail!("--require-bearer and --secret-header: choose one"),
    };
    let tools = Arc::new(tools());
    let notes = Arc::default();
    let pages = Arc::default();
    let subscribers = Arc::default();
    let service = StreamableHttpService::new(
        move || {
            Ok(Upstream {
                tools: tools.clone(),
                notes: Arc::clone(&notes),
                pages: Arc::clone(&pages),
                subscribers: Arc::clone(&subscribers),
            })
        },
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let mut router = axum::Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(check.clone(), authenticate));
    if let Check::Oauth(oauth) = &check {
        // RFC 9728 §3: open to anyone, outside the check above.
        let metadata = json!({
            "resource": oauth.resource,
            "authorization_servers": [oauth.issuer],
            "bearer_methods_supported": ["header"],
        });
        router = router.route(
            "/.well-known/oauth-protected-resource/mcp",
            axum::routing::get(move || async move { axum::Json(metadata) }),
        );
    }
    println!("listening on {base}");
    // Without TCP_NODELAY every small SSE write waits for the peer's delayed ACK (~40 ms), as
    // for the broker's own listener (`src/app.rs`).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router).await?;
    Ok(())
}
