//! One `tools/call` forwarded to a server behind the broker, and the
//! gates every forwarded request passes (a server's `prompts/get` and `resources/read` too,
//! [`super::content`]):
//!
//! 0. **The (client, server) pair** approved by the user ([`crate::broker::gateway_consent`]);
//!    if not, the broker's link to the page that approves it (with the credential, if that is
//!    missing too: one visit).
//! 1. **The credential** of the calling user: for a `token-exchange` server, a token minted for
//!    the user and the server's service ([`super::minted`]); for a `provider` server, the user's token through
//!    the same path as every broker tool ([`BrokerServer::token_for_tool`]: connected? scopes?
//!    refreshed? this client allowed?), so a user who has not connected — or not allowed this
//!    client — gets the broker's own link in the client's era (`-32042` / url elicitation,
//!    `InputRequiredResult`, `isError` text) and the call proceeds after the browser flow.
//! 2. **The user's connection** to the server ([`super::pool`]), opened on first use in the
//!    revision the server speaks ([`super::opening`]); the credential is set in its cell before
//!    each call, so a refreshed token is used at once.
//! 3. **The call**, the result passed back as it came (content, structuredContent, isError),
//!    within `gateway.call_timeout` (not counting the time the user takes to answer the
//!    server's questions, [`super::relay`]); the client's progress token routed; the upstream
//!    call cancelled when the client cancels. A 2026-07-28 server's `InputRequiredResult` is
//!    relayed in the client's era, and its retry carried back ([`super::rounds`]); a server's
//!    question mid-call of a 2026-07-28 client waits on this instance for the retry
//!    ([`super::flights`]); a server's own `-32042` is relayed as its page ([`super::pages`]). A plain
//!    request is one request ([`super::plain_request`]) — stateless to such a server, as a call is —
//!    and its rounds and `-32042` are relayed as a call's are.
//! 4. **A 401** (a `WWW-Authenticate` challenge, RFC 6750 §3): one forced refresh and one retry;
//!    refused again, the grant needs a new consent and the client gets the reconnect link.
//! 5. **A server that is down**, breaks off or times out: a retryable `isError` naming it; the
//!    connection is dropped and the next call opens another.
//!
//! Every call is audited (server, tool, outcome, latency; never arguments, results or tokens)
//! on the batched queue the token API uses, and counted per server in `/metrics`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::RoleServer;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData};
use rmcp::service::{RequestContext, ServiceError};
use secrecy::ExposeSecret;
use serde_json::json;

use super::Gateway;
use super::flights::Landing;
use super::minted::MintError;
use super::plain::{Failure, unauthorized};
use super::pool::{Connection, ConnectionKey};
use super::registry::{ServerEntry, Target};
use super::transport::{Credential, CredentialCell};
use crate::broker::gateway_consent;
use crate::broker::tokens::AccessToken;
use crate::mcp::elicitation;
use crate::mcp::handler::{BrokerServer, Caller};
use crate::mcp::results::{Unfinished, error_result};
use crate::mcp::tools::failure::tool_failed;
use crate::store::audit::{Actor, AuditEvent, Outcome};
use crate::store::gateway::GatewayAuth;

/// How long a client is told to wait before calling a server that did not answer again.
const RETRY_AFTER_SECONDS: u64 = 5;

/// Where a plain request records the connection it was last sent over.
pub(crate) type SentOver = std::sync::Mutex<Option<Arc<Connection>>>;

/// What is forwarded: a tool call (with its progress, the server's questions and cancellation)
/// or one plain request (`prompts/get`, `resources/read`, `resources/subscribe`,
/// [`super::content`]).
pub(crate) enum Forwarded<'a> {
    Tool {
        target: &'a Target,
        request: &'a CallToolRequestParams,
    },
    /// `request` as it goes to the server (its names the server's); `responses`: the client's
    /// `inputResponses`, of which a retry carries back only those the server asked for;
    /// `sent_over`, when given, is told the connection the request last went over (a
    /// subscription holds that very connection, not whichever the pool has by then).
    Plain {
        request: Box<rmcp::model::ClientRequest>,
        responses: Option<&'a rmcp::model::InputResponses>,
        sent_over: Option<&'a SentOver>,
    },
}

impl Forwarded<'_> {
    /// The client's `inputResponses` (MCP 2026-07-28), as it sent them.
    pub(crate) fn client_responses(&self) -> Option<&rmcp::model::InputResponses> {
        match self {
            Forwarded::Tool { request, .. } => request.input_responses.as_ref(),
            Forwarded::Plain { responses, .. } => *responses,
        }
    }
}

/// The server's answer to what was forwarded, or the broker's own answer in a tool's shape
/// (a link to the broker's page, a retryable `isError`), which the faces of plain requests
/// translate ([`super::content`]).
pub(crate) enum Answer {
    Tool(CallToolResponse),
    /// The server's result, or the JSON-RPC error it answered with (passed on as it came).
    Plain(Result<rmcp::model::ServerResult, ErrorData>),
}

impl From<CallToolResponse> for Answer {
    fn from(response: CallToolResponse) -> Self {
        Self::Tool(response)
    }
}

/// The credential of a server that needs no user's: its secret header, or nothing.
pub fn shared_credential(entry: &ServerEntry) -> Option<Credential> {
    match (&entry.row.auth, &entry.secret) {
        (GatewayAuth::SecretHeader { header, .. }, Some(secret)) => {
            Credential::new(header.as_str(), secret.expose_secret())
        }
        _ => None,
    }
}

/// A `token-exchange` server's credential: the token minted for the user, as a bearer.
pub(super) fn minted_credential(minted: &secrecy::SecretString) -> Option<Credential> {
    Credential::new("Authorization", &format!("Bearer {}", minted.expose_secret()))
}

pub(super) fn provider_credential(auth: &GatewayAuth, token: &AccessToken) -> Option<Credential> {
    let (_, _, header, scheme) = auth.user_credential()?;
    Credential::new(header.as_str(), &scheme.value(token.token.expose_secret()))
}

/// The retryable answer for a server that did not answer: `isError`, naming it, with
/// `structuredContent` `{"error": "server_unavailable", "server", "retryAfter"}` in the shape
/// of the broker's other retryable answers (`crate::mcp::tools::failure`).
pub fn server_unavailable(server: &str) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!(
        "The server {server} behind the broker is not answering right now; try again in {RETRY_AFTER_SECONDS} seconds."
    ))]);
    result.structured_content =
        Some(json!({"error": "server_unavailable", "server": server, "retryAfter": RETRY_AFTER_SECONDS}));
    result
}

impl BrokerServer {
    /// `tools/call` of a name a server behind the broker serves; `None` if none does.
    pub(crate) async fn gateway_call(
        &self,
        caller: &Caller,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, Unfinished>> {
        let gateway = self.state.gateway.clone();
        let (entry, target) = gateway.resolve(&request.name)?;
        if let Err(error) = gateway.check(&entry, &request.name, request.arguments.as_ref()) {
            return Some(Err(error.into()));
        }
        let started = Instant::now();
        let forwarded = Forwarded::Tool { target: &target, request };
        let (answer, outcome) = self.forward(&gateway, &entry, &forwarded, caller, ctx).await;
        let tool = match &target {
            Target::Tool(name) => name.as_str(),
            Target::Connect => super::registry::CONNECT_TOOL,
        };
        self.audit_call(&entry, &format!("tool={tool}"), caller, outcome, started.elapsed()).await;
        Some(answer.and_then(|answer| match answer {
            Answer::Tool(response) => Ok(response),
            Answer::Plain(_) => Err(ErrorData::internal_error("a tool call got another request's answer", None).into()),
        }))
    }

    /// `forwarded` to `entry` for `caller`, through every gate (steps 0–5 above); the answer
    /// and the outcome label audited and counted.
    pub(crate) async fn forward(
        &self,
        gateway: &Arc<Gateway>,
        entry: &Arc<ServerEntry>,
        forwarded: &Forwarded<'_>,
        caller: &Caller,
        ctx: &RequestContext<RoleServer>,
    ) -> (Result<Answer, Unfinished>, &'static str) {
        // 0. The (client, server) pair: approved by the user, or asked for — together with the
        //    credential when that is missing too, so one visit covers both.
        let user = &caller.user;
        let approved =
            match gateway_consent::approved(&self.state.app.core, &user.user_id, &user.client, &entry.row.id).await {
                Ok(approved) => approved,
                Err(error) => return (Err(tool_failed(error).into()), "failed"),
            };
        let asking = (!approved).then_some(entry.as_ref());
        // 1. The credential.
        let token = match self.user_token(entry, caller, asking).await {
            Ok(token) => token,
            Err(answer) => return (answer.map(Answer::from), "needs_user"),
        };
        if !approved {
            return (self.ask_pair(entry, caller).await.map(Answer::from), "needs_user");
        }
        let credential = match (&token, &entry.row.auth) {
            (Some(token), _) => provider_credential(&entry.row.auth, token),
            (None, GatewayAuth::TokenExchange { service_id }) => {
                match gateway
                    .minted
                    .token_for(&self.state.app.identity, &self.state.app.core.store, user, &entry.row.id, service_id)
                    .await
                {
                    Ok(minted) => minted_credential(&minted),
                    Err(MintError::Store(error)) => return (Err(tool_failed(error).into()), "failed"),
                    Err(error) => {
                        let text = format!("The server {} cannot be called: {error}.", entry.row.name);
                        return (Ok(Answer::Tool(error_result(text).into())), "failed");
                    }
                }
            }
            (None, _) => shared_credential(entry),
        };
        let key = gateway.pool.key(&caller.user, entry);
        let first = self.attempt_rounds(gateway, entry, &key, credential, forwarded, caller, ctx).await;
        if matches!(entry.row.auth, GatewayAuth::TokenExchange { .. }) {
            match first {
                // The tool server passes on the broker's own link (its user must connect, or
                // allow its service): shown as the broker's, in the client's era.
                Err(Failure::ServerLink { error, questions }) => {
                    let (answer, outcome) = self.brokers_link_from_server(entry, caller, error, questions).await;
                    return (answer.map(Answer::from), outcome);
                }
                // A refused token is never offered again.
                Err(Failure::Unauthorized) => gateway.minted.forget(user, &entry.row.id),
                _ => {}
            }
        }
        let (Err(Failure::Unauthorized), Some(token)) = (&first, &token) else {
            return self.settle(entry, caller, first);
        };
        // 4. A 401: one forced refresh and one retry, then a new consent.
        let provider = entry.row.auth.user_credential().and_then(|(p, ..)| self.state.app.core.providers.get(p));
        if let Some(provider) = provider
            && let Some(fresh) =
                crate::broker::provider_call::retry_token_after_401(&self.state.app.core, &provider, token).await
        {
            let credential = provider_credential(&entry.row.auth, &fresh);
            let second = self.attempt_rounds(gateway, entry, &key, credential, forwarded, caller, ctx).await;
            if !matches!(second, Err(Failure::Unauthorized)) {
                return self.settle(entry, caller, second);
            }
            return (self.refused_again(entry, caller, &fresh).await.map(Answer::from), "unauthorized");
        }
        (self.refused_again(entry, caller, token).await.map(Answer::from), "unauthorized")
    }

    /// A `provider` server's token for this user and client, `Ok(None)` for other kinds, or
    /// the answer that sends the user to the broker's page first — a page that approves the
    /// (client, server) pair too when `asking` names the server.
    async fn user_token(
        &self,
        entry: &ServerEntry,
        caller: &Caller,
        asking: Option<&ServerEntry>,
    ) -> Result<Option<AccessToken>, Result<CallToolResponse, Unfinished>> {
        let Some((provider, scopes, ..)) = entry.row.auth.user_credential() else { return Ok(None) };
        let Some(provider) = self.state.app.core.providers.get(provider) else {
            let text = format!("The server {} needs provider {provider}, which is not configured.", entry.row.name);
            return Err(Ok(error_result(text).into()));
        };
        let mut who = caller.requester();
        who.server = asking.map(|entry| entry.row.id.as_str());
        let hint = asking.map(|entry| elicitation::server_hint(entry.row.name.as_str()));
        match self.token_for_requester(caller, &who, &provider, None, scopes, hint.as_deref()).await {
            Ok(token) => Ok(Some(token)),
            Err(Ok(result)) => Err(Ok(result.into())),
            Err(Err(unfinished)) => Err(Err(unfinished)),
        }
    }

    /// The user has not approved this client for this server (and nothing else is missing):
    /// the broker's own link to the page that asks, in the client's era — as for a missing
    /// grant (`-32042` / `InputRequiredResult` / `isError` text).
    async fn ask_pair(&self, entry: &ServerEntry, caller: &Caller) -> Result<CallToolResponse, Unfinished> {
        let mut who = caller.requester();
        who.server = Some(entry.row.id.as_str());
        let row = match gateway_consent::open(&self.state.app.core, &who, &entry.row.id, entry.row.name.as_str()).await
        {
            Ok(row) => row,
            Err(error) => return Err(tool_failed(error).into()),
        };
        self.remember_elicitation(&row.id);
        if !caller.url_mode {
            return Ok(error_result(elicitation::manual_server_text(&self.state.app, &row)).into());
        }
        match &caller.round {
            Some(round) => {
                let url = crate::broker::authorizations::connect_url(&self.state.app.core, &row.id).to_string();
                Err(round.ask_to_open(&row.id, elicitation::server_message(entry.row.name.as_str()), url).into())
            }
            None => Err(elicitation::server_elicitation_required(&self.state.app, &row).into()),
        }
    }

    /// The server refused a token after a refresh (or one that cannot be refreshed): the grant
    /// needs a new consent; the answer is the broker's link to give it.
    async fn refused_again(
        &self,
        entry: &ServerEntry,
        caller: &Caller,
        token: &AccessToken,
    ) -> Result<CallToolResponse, Unfinished> {
        tracing::info!(server = %entry.row.name, grant = %token.grant.id, "a server behind the broker refused the user's token after a refresh; a new consent is needed");
        if let Err(error) =
            crate::broker::provider_call::refused_again(&self.state.app.core, token, entry.row.name.as_str()).await
        {
            return Err(crate::mcp::tools::failure::tool_failed(error).into());
        }
        match self.user_token(entry, caller, None).await {
            Err(answer) => answer,
            // Connected again meanwhile: the client may simply call again.
            Ok(_) => {
                Ok(error_result(format!("The server {} refused your credential; call the tool again.", entry.row.name))
                    .into())
            }
        }
    }

    /// One try of a tool call: the user's connection with `credential`, then the call.
    /// `request` is the call as it goes to the server ([`super::rounds`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn attempt(
        &self,
        gateway: &Arc<Gateway>,
        entry: &Arc<ServerEntry>,
        key: &ConnectionKey,
        credential: Option<Credential>,
        target: &Target,
        caller: &Caller,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Failure> {
        let connection = self.connection(gateway, entry, key, credential, caller, ctx).await?;
        self.call_tool_on(gateway, entry, key, &connection, target, caller, request, ctx).await
    }

    /// The user's connection to the server (opened if there is none), carrying `credential`
    /// from now on.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn connection(
        &self,
        gateway: &Arc<Gateway>,
        entry: &Arc<ServerEntry>,
        key: &ConnectionKey,
        credential: Option<Credential>,
        caller: &Caller,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Arc<Connection>, Failure> {
        let limit = self.state.app.core.config.gateway.call_timeout;
        let open = {
            let credential = credential.clone();
            move || {
                let cell = Arc::new(CredentialCell::default());
                cell.set(credential);
                gateway.open(entry, cell, Some(&caller.user.user_id))
            }
        };
        let opened = tokio::select! {
            _ = ctx.ct.cancelled() => return Err(Failure::Cancelled),
            opened = tokio::time::timeout(limit, gateway.pool.get_or_open(key, open)) => opened,
        };
        let connection = match opened {
            Ok(Ok(connection)) => connection,
            Ok(Err(error)) if unauthorized(&error) => return Err(Failure::Unauthorized),
            Ok(Err(error)) => {
                tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "could not connect to a server behind the broker");
                return Err(Failure::Unreachable);
            }
            Err(_) => {
                tracing::warn!(server = %entry.row.name, "a server behind the broker did not answer in time to connect");
                return Err(Failure::Unreachable);
            }
        };
        connection.credential.set(credential);
        // Lists taken from the database (another instance's read, or an earlier start's): read
        // once by this process too, beside the call (`super::shared_lists`). Unknown lists are
        // read by the connect tool instead.
        if entry.tools().is_some() && entry.claim_first_read() {
            let (gateway, entry, peer) = (gateway.clone(), entry.clone(), connection.service.peer().clone());
            tokio::spawn(async move {
                if gateway.fill_tools(&entry, &peer).await {
                    gateway.fill_lists(&entry, &peer).await;
                } else {
                    entry.read_failed();
                }
            });
        }
        Ok(connection)
    }

    /// The tool call over the user's `connection`.
    #[allow(clippy::too_many_arguments)]
    async fn call_tool_on(
        &self,
        gateway: &Arc<Gateway>,
        entry: &Arc<ServerEntry>,
        key: &ConnectionKey,
        connection: &Arc<Connection>,
        target: &Target,
        caller: &Caller,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Failure> {
        let limit = self.state.app.core.config.gateway.call_timeout;
        let peer = connection.service.peer();
        let tool = match target {
            Target::Connect => {
                if !gateway.fill_tools(entry, peer).await {
                    gateway.pool.forget(key, connection);
                    return Err(Failure::Unreachable);
                }
                gateway.fill_lists(entry, peer).await;
                let names = entry.tools().map(|t| t.names()).unwrap_or_default();
                let text = format!("Connected to {}. Its tools: {}.", entry.row.name, names.join(", "));
                let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
                result.structured_content = Some(json!({"server": entry.row.name.as_str(), "tools": names}));
                return Ok(result.into());
            }
            Target::Tool(tool) => tool.clone(),
        };
        let mut params = CallToolRequestParams::new(tool);
        params.arguments = request.arguments.clone();
        params.input_responses = request.input_responses.clone();
        params.request_state = request.request_state.clone();
        let call = rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params));
        // The call's progress, the server's questions within it, its log messages, its timeout
        // and cancellation (super::flights).
        let call = match self.send_upstream(entry, connection, call, ctx, limit).await {
            Ok(call) => call,
            Err(error) => {
                tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "a call to a server behind the broker could not be sent");
                gateway.pool.forget(key, connection);
                return Err(Failure::Unreachable);
            }
        };
        let landing = self.fly(gateway, entry, caller, ctx, call).await?;
        self.tool_landing(gateway, entry, key, landing)
    }

    /// A forwarded tool call's end, as the gates take it.
    pub(super) fn tool_landing(
        &self,
        gateway: &Arc<Gateway>,
        entry: &ServerEntry,
        key: &ConnectionKey,
        landing: Landing,
    ) -> Result<CallToolResponse, Failure> {
        match landing {
            Landing::Answered { connection, answer } => self.call_answer(gateway, entry, key, &connection, answer),
            Landing::Broker(result) => Ok(result.into()),
        }
    }

    /// The server's answer to a forwarded tool call, as the gates take it.
    fn call_answer(
        &self,
        gateway: &Arc<Gateway>,
        entry: &ServerEntry,
        key: &ConnectionKey,
        connection: &Arc<Connection>,
        answer: Result<rmcp::model::ServerResult, ServiceError>,
    ) -> Result<CallToolResponse, Failure> {
        let answer = answer.map(|result| match result {
            rmcp::model::ServerResult::CallToolResult(result) => CallToolResponse::Complete(result),
            // MCP 2026-07-28: the server needs the user first (super::rounds).
            rmcp::model::ServerResult::InputRequiredResult(asked) => CallToolResponse::InputRequired(asked),
            _ => CallToolResponse::Complete(error_result(format!(
                "The server {} started a task, which the broker does not relay yet.",
                entry.row.name
            ))),
        });
        match answer {
            Ok(response) => Ok(response),
            Err(ServiceError::McpError(error)) if error.code == elicitation::URL_ELICITATION_REQUIRED => {
                let questions = Some(connection.service.service().questions.clone());
                Err(Failure::ServerLink { error, questions })
            }
            Err(ServiceError::McpError(error)) => Ok(passed_on(entry, error)),
            Err(error) if unauthorized(&error) => Err(Failure::Unauthorized),
            Err(error) => {
                tracing::warn!(server = %entry.row.name, error = %crate::error_chain::Chain(&error), "a call to a server behind the broker failed");
                gateway.pool.forget(key, connection);
                Err(Failure::Unreachable)
            }
        }
    }

    /// Audited on the batched queue (never a write per call on the request's path), counted.
    /// `what` names what was forwarded (`tool=whoami`, `prompt=greeting`, `resource=read`).
    pub(crate) async fn audit_call(
        &self,
        entry: &ServerEntry,
        what: &str,
        caller: &Caller,
        outcome: &'static str,
        took: Duration,
    ) {
        crate::telemetry::gateway_call(entry.row.name.as_str(), outcome, took.as_secs_f64());
        let detail = format!("server={} {what} outcome={outcome} latency_ms={}", entry.row.name, took.as_millis());
        let provider = entry.row.auth.user_credential().map(|(provider, ..)| provider.as_str());
        let result = match outcome {
            "ok" | "tool_error" | "server_error" | "needs_user" => Outcome::Success,
            _ => Outcome::Failure,
        };
        let event = AuditEvent::new(Actor::User(&caller.user.user_id), "gateway.call", Some(&caller.user.user_id))
            .provider(provider)
            .detail(Some(&detail))
            .outcome(result);
        if let Err(error) = self.state.app.core.store.audit_queue().record(self.state.app.core.now(), event).await {
            tracing::warn!(error = %crate::error_chain::Chain(&error), "a forwarded call could not be audited");
        }
    }

    /// The answer for the client and the outcome label of one attempt.
    fn settle(
        &self,
        entry: &ServerEntry,
        caller: &Caller,
        attempt: Result<Answer, Failure>,
    ) -> (Result<Answer, Unfinished>, &'static str) {
        match attempt {
            Ok(Answer::Tool(CallToolResponse::Complete(result))) if result.is_error == Some(true) => {
                (Ok(Answer::Tool(CallToolResponse::Complete(result))), "tool_error")
            }
            Ok(answer @ Answer::Tool(CallToolResponse::InputRequired(_))) => (Ok(answer), "needs_user"),
            Ok(Answer::Plain(Err(error))) => (Ok(Answer::Plain(Err(error))), "server_error"),
            Ok(answer) => (Ok(answer), "ok"),
            Err(Failure::Asked(round)) => (Ok(Answer::Tool(CallToolResponse::InputRequired(*round))), "needs_user"),
            // The server's own page, relayed in the client's era (super::pages).
            Err(Failure::ServerLink { error, questions }) => {
                let (answer, outcome) = self.relay_server_link(entry, caller, error, questions.as_ref());
                (answer.map(Answer::from), outcome)
            }
            Err(Failure::Unreachable) => {
                (Ok(Answer::Tool(server_unavailable(entry.row.name.as_str()).into())), "unreachable")
            }
            Err(Failure::Cancelled) => {
                (Err(ErrorData::internal_error("the call was cancelled", None).into()), "cancelled")
            }
            // Only reached for servers without a user's token: nothing to refresh.
            Err(Failure::Unauthorized) => (
                Ok(Answer::Tool(
                    error_result(format!("The server {} refused the broker's credential.", entry.row.name)).into(),
                )),
                "unauthorized",
            ),
        }
    }
}

/// A JSON-RPC error from the server, passed on. A URL elicitation (`-32042`) is relayed as the
/// server's own ([`super::pages`]) before it gets here; one that reaches this is never passed
/// off as the broker's.
pub(super) fn passed_on(entry: &ServerEntry, error: ErrorData) -> CallToolResponse {
    if error.code == crate::mcp::elicitation::URL_ELICITATION_REQUIRED {
        return error_result(format!(
            "The server {} asked you to open a page, which the broker could not relay.",
            entry.row.name
        ))
        .into();
    }
    let mut result = error_result(format!("The server {} answered with an error: {}", entry.row.name, error.message));
    result.structured_content =
        Some(json!({"error": "server_error", "server": entry.row.name.as_str(), "code": error.code.0}));
    result.into()
}
