//! The MCP face: one `ServerHandler` per MCP session (rmcp calls the factory per session, and
//! per request for stateless ones) with one tool, `whoami_at_demo`. It only translates what
//! [`super::broker`] decides: an answer → structured result, anything but "the user must
//! approve" → `isError` or an MCP error, and "the user must approve" per protocol era:
//!
//! - 2025-11-25 and older: `-32042` with the broker's link, plus a watcher that sends
//!   `notifications/elicitation/complete` when the user finishes; the client then calls again.
//! - 2026-07-28: an `InputRequiredResult` ([`super::mrtr`]) with the link and a sealed
//!   `requestState` ([`super::request_state`]); the client's retry waits here, bounded, for the
//!   user to finish, then gets the real answer (or the state again, or the outcome).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomNotification, ElicitationAction,
    ErrorCode, ErrorData, Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, ServerNotification, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use secrecy::SecretString;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::broker::{AuthorizationStatus, BrokerClient, Mode, PROVIDER, PendingAuthorization, Refusal};
use super::mrtr;
use super::request_state::{Binding, StateSealer, Waiting};
use super::watch::{self, Settled};
use super::web::UserToken;

pub const WHOAMI: &str = "whoami_at_demo";
/// MCP 2025-11-25 URLElicitationRequiredError (rmcp has no constant for it).
const URL_ELICITATION_REQUIRED: ErrorCode = ErrorCode(-32042);
const COMPLETE_METHOD: &str = "notifications/elicitation/complete";
const SESSION_HEADER: &str = "mcp-session-id";
/// The one answer to any `requestState` we cannot accept: it says nothing about why, or whose.
const BAD_STATE: &str = "invalid requestState; call the tool again without it";

/// Shared by all sessions.
pub struct Shared {
    pub broker: BrokerClient,
    pub mode: Mode,
    /// Cancelled at shutdown; each session's token is a child of it.
    pub shutdown: CancellationToken,
    /// Seals and opens 2026-07-28 `requestState`s.
    pub sealer: StateSealer,
    /// How long a 2026-07-28 retry waits for the user before answering "still waiting".
    pub input_wait: Duration,
}

pub struct ToolServer {
    shared: Arc<Shared>,
    session: SessionScope,
}

/// Lives as long as rmcp keeps this session's handler; dropping it (session closed or expired)
/// stops the session's watchers, so nobody waits for a client that has left.
struct SessionScope {
    cancel: CancellationToken,
    /// Authorizations already watched for this session: a retry before the user has approved
    /// gets the same authorization from the broker, and one notification is enough.
    watched: Arc<Mutex<HashSet<String>>>,
}

impl Drop for SessionScope {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl ToolServer {
    pub fn new(shared: Arc<Shared>) -> Self {
        let cancel = shared.shutdown.child_token();
        Self { shared, session: SessionScope { cancel, watched: Default::default() } }
    }

    // MCP 2025-11-25 and 2026-07-28 server/tools §Calling tools.
    async fn whoami(
        &self,
        token: &SecretString,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // This server does not verify the user token: the broker does, in the exchange or the
        // proxy call, checking its signature, expiry and that its audience is our --resource.
        match self.shared.broker.whoami(self.shared.mode, token).await {
            Ok(me) => Ok(CallToolResult::structured(me).into()),
            Err(Refusal::AuthorizationRequired(authorization)) => self.ask_user(&authorization, token, request, ctx),
            Err(other) => refused(other).map(Into::into),
        }
    }

    /// "The user must approve at the broker first", in the client's era.
    fn ask_user(
        &self,
        authorization: &PendingAuthorization,
        token: &SecretString,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !mrtr::is_stateless(ctx) {
            let parts = ctx.extensions.get::<http::request::Parts>();
            let session_id = parts.and_then(|p| p.headers.get(SESSION_HEADER)).and_then(|v| v.to_str().ok());
            self.watch(session_id, authorization, ctx);
            return Err(url_elicitation_required(authorization));
        }
        if !mrtr::opens_urls(ctx) {
            // A client that cannot open URLs gets the link to show its user.
            let text = format!("{}: {}; then call {WHOAMI} again.", ask_message(authorization), authorization.url);
            return Ok(error_result(text).into());
        }
        let binding = Binding::new(token, &request.name, request.arguments.as_ref());
        let waiting = Waiting { authorization: authorization.id.clone() };
        let state = self.shared.sealer.seal(&waiting, &binding, watch::lifetime(authorization.expires_at)).map_err(
            |error| {
                tracing::error!(%error, "could not seal a requestState");
                ErrorData::internal_error("could not prepare the approval request", None)
            },
        )?;
        let message = format!("{} so that {WHOAMI} can read your profile there.", ask_message(authorization));
        Ok(mrtr::ask(authorization, message, state).into())
    }

    /// A 2026-07-28 retry: the state must be ours and this caller's, for this very request; a
    /// decline ends it; otherwise wait (bounded) for the user, then answer.
    async fn resume(
        &self,
        token: &SecretString,
        sealed: &str,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let binding = Binding::new(token, &request.name, request.arguments.as_ref());
        let waiting = self.shared.sealer.open(sealed, &binding).map_err(|refused| {
            tracing::info!(%refused, "refused a requestState");
            ErrorData::invalid_params(BAD_STATE, None)
        })?;
        if let Some(ElicitationAction::Decline | ElicitationAction::Cancel) =
            mrtr::answer(request.input_responses.as_ref())
        {
            return Ok(error_result(format!(
                "You did not approve access to your {PROVIDER} account, so {WHOAMI} cannot read your profile. \
                 Call it again to be asked again."
            ))
            .into());
        }
        let broker = &self.shared.broker;
        let settled = tokio::select! {
            // The client gave up on this request: nobody to answer.
            _ = ctx.ct.cancelled() => Settled::Open,
            settled = watch::within(broker, &waiting.authorization, self.shared.input_wait, &self.session.cancel) => settled,
        };
        match settled {
            Settled::Completed => self.whoami(token, request, ctx).await,
            Settled::Open => Ok(mrtr::still_waiting(sealed).into()),
            Settled::Ended(status) => Ok(error_result(ended(status)).into()),
            Settled::Unknown => Ok(error_result(format!(
                "The broker no longer knows this approval request; call {WHOAMI} again to start over."
            ))
            .into()),
        }
    }

    /// Starts following the authorization for this session, once. Stateless requests (no
    /// session) have no stream to notify on: their client just calls again.
    fn watch(&self, session_id: Option<&str>, authorization: &PendingAuthorization, ctx: &RequestContext<RoleServer>) {
        if session_id.is_none() {
            return;
        }
        let first = self.session.watched.lock().unwrap_or_else(|p| p.into_inner()).insert(authorization.id.clone());
        if !first {
            return;
        }
        let shared = self.shared.clone();
        let watched = self.session.watched.clone();
        let cancel = self.session.cancel.clone();
        let peer = ctx.peer.clone();
        let authorization = authorization.clone();
        tokio::spawn(async move {
            let completed = watch::until_final(&shared.broker, &authorization, &cancel).await;
            watched.lock().unwrap_or_else(|p| p.into_inner()).remove(&authorization.id);
            // MCP 2025-11-25 client/elicitation §Completion notifications: only to the client
            // that started it, and only while its session lasts.
            if completed && !cancel.is_cancelled() && !peer.is_transport_closed() {
                let sent = peer.send_notification(complete_notification(&authorization.id)).await;
                if sent.is_err() {
                    tracing::debug!(elicitation = %authorization.id, "session gone before the completion notification");
                }
            }
        });
    }
}

/// Every refusal but "the user must approve", the same in every era.
fn refused(refusal: Refusal) -> Result<CallToolResult, ErrorData> {
    match refusal {
        Refusal::AuthorizationRequired(_) => {
            Err(ErrorData::internal_error("an approval request reached the wrong translation", None))
        }
        Refusal::SubjectToken => Err(ErrorData::invalid_request(
            "the broker refused your token (expired, revoked, or not issued for this tool server); sign in again",
            Some(json!({ "reason": "invalid_subject_token" })),
        )),
        Refusal::Client => {
            tracing::error!("the broker refused this tool server's credentials; check --client-id/--client-secret");
            Err(ErrorData::internal_error(
                "the tool server is misconfigured (the broker refused its credentials)",
                None,
            ))
        }
        Refusal::ProviderUnavailable { retry_after } => Ok(error_result(match retry_after {
            Some(seconds) => format!("The {PROVIDER} provider is unavailable right now; try again in {seconds} s."),
            None => format!("The {PROVIDER} provider is unavailable right now; try again later."),
        })),
        Refusal::Broker { code, detail } => {
            Ok(error_result(format!("The broker refused the request ({code}): {detail}")))
        }
        Refusal::Provider { status, detail } => {
            Ok(error_result(format!("The {PROVIDER} provider answered {status}: {detail}")))
        }
        Refusal::Unreachable(why) => {
            tracing::warn!(%why, "broker call failed");
            Ok(error_result(format!("The broker could not be asked: {why}")))
        }
    }
}

/// An authorization that will never complete, in words.
fn ended(status: AuthorizationStatus) -> String {
    let what = match status {
        AuthorizationStatus::Declined => "was declined",
        AuthorizationStatus::Expired => "expired before it was finished",
        _ => "failed",
    };
    format!(
        "The approval for your {PROVIDER} account {what}, so {WHOAMI} cannot read your profile. Call it again to start over."
    )
}

// MCP 2025-11-25 client/elicitation §URL Elicitation Required Error: the URL is the broker's
// own page, as the broker gave it.
fn url_elicitation_required(authorization: &PendingAuthorization) -> ErrorData {
    ErrorData::new(
        URL_ELICITATION_REQUIRED,
        format!("This request needs your approval at the broker for your {PROVIDER} account."),
        Some(json!({
            "elicitations": [{
                "mode": "url",
                "elicitationId": authorization.id,
                "url": authorization.url.as_str(),
                "message": format!("{} so that {WHOAMI} can read your profile there; then call it again.", ask_message(authorization)),
            }],
        })),
    )
}

/// What the user is asked to do at the broker, and why (from the broker's `reason`).
fn ask_message(authorization: &PendingAuthorization) -> String {
    match authorization.reason.as_deref() {
        Some("not_connected") => format!("Connect your {PROVIDER} account at the broker"),
        Some("needs_reconsent") => format!("Reconnect your {PROVIDER} account at the broker"),
        Some("missing_scopes") if !authorization.missing_scopes.is_empty() => {
            format!("Allow more access to your {PROVIDER} account ({})", authorization.missing_scopes.join(", "))
        }
        Some("consent_required") => format!("Allow this tool server to use your {PROVIDER} connection"),
        _ => format!("Approve this tool server's access to your {PROVIDER} account"),
    }
}

fn complete_notification(elicitation_id: &str) -> ServerNotification {
    ServerNotification::CustomNotification(CustomNotification::new(
        COMPLETE_METHOD,
        Some(json!({ "elicitationId": elicitation_id })),
    ))
}

fn error_result(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

fn schema(value: Value) -> Arc<JsonObject> {
    Arc::new(value.as_object().cloned().unwrap_or_default())
}

fn whoami_tool() -> Tool {
    let mut annotations = ToolAnnotations::with_title("Who am I at demo");
    annotations.read_only_hint = Some(true);
    annotations.idempotent_hint = Some(true);
    annotations.open_world_hint = Some(true);
    Tool::new(
        WHOAMI,
        "Show which account you are signed in with at the demo provider, and the scopes this tool holds. \
         The first time, you are asked to approve access on the broker's own page.",
        schema(json!({"type": "object", "properties": {}, "additionalProperties": false})),
    )
    .with_title("Who am I at demo")
    .with_raw_output_schema(schema(json!({
        "type": "object",
        "properties": {
            "account": {"type": "string"},
            "scopes": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["account"]
    })))
    .with_annotations(annotations)
}

impl ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        let mut implementation = Implementation::new("oauth-broker-example-tool-server", env!("CARGO_PKG_VERSION"));
        implementation.title = Some("Example tool server (demo provider via oauth-broker)".into());
        let mut capabilities = ServerCapabilities::builder().enable_tools().build();
        if let Some(tools) = capabilities.tools.as_mut() {
            tools.list_changed = Some(false);
        }
        ServerConfig::new(capabilities).with_server_info(implementation).with_instructions(
            "whoami_at_demo shows your demo account. If you have not approved access yet, you get a link to the \
             broker's page; approve there, then call the tool again.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![whoami_tool()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != WHOAMI {
            return Err(ErrorData::invalid_params(format!("unknown tool: {}", request.name), None));
        }
        // Put there by `web::require_bearer`, which runs before rmcp sees the request.
        let token = ctx
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<UserToken>())
            .map(|token| token.0.clone())
            .ok_or_else(|| ErrorData::internal_error("request reached the tool without a bearer token", None))?;
        // A retry is checked first: it must repeat the request its state was sealed for.
        if mrtr::is_stateless(&ctx)
            && let Some(sealed) = request.request_state.as_deref()
        {
            return self.resume(&token, sealed, &request, &ctx).await;
        }
        // SEP-1303: argument problems are tool errors, so the model can correct itself.
        if request.arguments.as_ref().is_some_and(|args| !args.is_empty()) {
            return Ok(error_result(format!("{WHOAMI} takes no arguments")).into());
        }
        self.whoami(&token, &request, &ctx).await
    }
}
