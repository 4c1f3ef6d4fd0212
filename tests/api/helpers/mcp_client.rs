//! A real rmcp client of the broker (or of any MCP server), with the elicitation capabilities a
//! test asks for, that records what the server sends it: elicitations, completions, resource
//! updates, log messages and progress.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceError;
use rmcp::model::ProtocolVersion;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CustomNotification, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ErrorData, FormElicitationCapability, Implementation, UrlElicitationCapability,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, NotificationContext, RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient};
use serde_json::Value;
use tokio::sync::{Mutex, mpsc};

use super::TestApp;

impl TestApp {
    /// A real rmcp client with the given elicitation capabilities, authenticated as `name`.
    pub async fn mcp_client(&self, name: &str, kind: ClientKind) -> McpClient {
        let token = self.token_for(name).await;
        self.mcp_client_with_token(&token, kind).await.unwrap()
    }

    pub async fn mcp_client_with_token(
        &self,
        token: &str,
        kind: ClientKind,
    ) -> Result<McpClient, rmcp::service::ClientInitializeError> {
        mcp_client_at(&self.mcp_url(), token, kind).await
    }

    /// A real rmcp client speaking MCP 2026-07-28 (`server/discover`, no session, everything in
    /// each request's `_meta`), authenticated as `name`. Its `call_tool` drives
    /// `InputRequiredResult` rounds itself through its elicitation handler.
    #[allow(dead_code, reason = "used by the round-trip tests")]
    pub async fn mcp_client_2026(&self, name: &str, kind: ClientKind) -> McpClient {
        let token = self.token_for(name).await;
        let lifecycle = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
        mcp_client_with_lifecycle(&self.mcp_url(), &token, kind, lifecycle).await.unwrap()
    }
}

/// A real rmcp client of any MCP server at `url` (the broker's, or a tool server's), with the
/// given elicitation capabilities and bearer token.
pub async fn mcp_client_at(
    url: &str,
    token: &str,
    kind: ClientKind,
) -> Result<McpClient, rmcp::service::ClientInitializeError> {
    mcp_client_with_lifecycle(url, token, kind, ClientLifecycleMode::Initialize).await
}

/// [`mcp_client_at`] with the lifecycle of a protocol revision: `Initialize` for a 2025-11-25
/// session, `Discover` for stateless 2026-07-28.
pub async fn mcp_client_with_lifecycle(
    url: &str,
    token: &str,
    kind: ClientKind,
    lifecycle: ClientLifecycleMode,
) -> Result<McpClient, rmcp::service::ClientInitializeError> {
    let (elicit_tx, elicit_rx) = mpsc::unbounded_channel();
    let (done_tx, done_rx) = mpsc::unbounded_channel();
    let (updated_tx, updated_rx) = mpsc::unbounded_channel();
    let progress = Arc::new(tokio::sync::watch::Sender::new(0usize));
    let form_answers = FormAnswers::default();
    let (logs_tx, logs_rx) = mpsc::unbounded_channel();
    let handler = RecordingClient {
        kind,
        elicitations: elicit_tx,
        completions: done_tx,
        updates: updated_tx,
        logs: logs_tx,
        progress: progress.clone(),
        form_answers: form_answers.clone(),
    };
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token),
    );
    let service = handler.serve_with_lifecycle(transport, lifecycle).await?;
    Ok(McpClient {
        service,
        elicitations: Mutex::new(elicit_rx),
        completions: Mutex::new(done_rx),
        updates: Mutex::new(updated_rx),
        logs: Mutex::new(logs_rx),
        progress,
        form_answers,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// Declares `elicitation: {form: {}, url: {}}`.
    Url,
    /// Declares `elicitation: {}` (form only).
    FormOnly,
    /// Declares no elicitation capability.
    NoElicitation,
    /// Declares URL mode but declines every elicitation.
    UrlDeclining,
    /// Declares `elicitation: {url: {}}` (URL mode only, no forms).
    #[allow(dead_code, reason = "used by the forms tests")]
    UrlOnly,
    /// Declares URL and form mode, records each elicitation and never answers it (a user who
    /// has the question open).
    #[allow(dead_code, reason = "used by the stop tests")]
    Silent,
}

/// Answers a client gives to form elicitations, in order (see [`McpClient::answer_forms`]).
/// With none queued, a form gets the client kind's usual answer.
#[derive(Clone, Default)]
pub struct FormAnswers(Arc<std::sync::Mutex<VecDeque<ElicitResult>>>);

pub struct McpClient {
    pub service: RunningService<RoleClient, RecordingClient>,
    elicitations: Mutex<mpsc::UnboundedReceiver<ElicitRequestParams>>,
    completions: Mutex<mpsc::UnboundedReceiver<String>>,
    /// URIs of `notifications/resources/updated`.
    updates: Mutex<mpsc::UnboundedReceiver<String>>,
    /// `notifications/message`, as (level, logger, data).
    logs: Mutex<mpsc::UnboundedReceiver<LogMessage>>,
    progress: Arc<tokio::sync::watch::Sender<usize>>,
    #[allow(dead_code, reason = "used by the forms tests")]
    form_answers: FormAnswers,
}

#[allow(dead_code, reason = "used by the forms tests")]
impl McpClient {
    /// Queues answers for the next form elicitations (one each, in order).
    pub fn answer_forms(&self, answers: impl IntoIterator<Item = ElicitResult>) {
        self.form_answers.0.lock().unwrap().extend(answers);
    }

    /// The next `elicitation/create` the server sent, of either mode.
    pub async fn next_elicitation(&self) -> ElicitRequestParams {
        tokio::time::timeout(Duration::from_secs(20), self.elicitations.lock().await.recv())
            .await
            .expect("an elicitation")
            .unwrap()
    }

    /// The next form elicitation: its message and `requestedSchema` as JSON.
    pub async fn next_form_elicitation(&self) -> (String, serde_json::Value) {
        match self.next_elicitation().await {
            ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } => {
                (message, serde_json::to_value(requested_schema).unwrap())
            }
            other => panic!("expected a form elicitation, got {other:?}"),
        }
    }

    /// Every elicitation received and not yet taken.
    pub async fn drain_elicitations(&self) -> Vec<ElicitRequestParams> {
        let mut receiver = self.elicitations.lock().await;
        std::iter::from_fn(|| receiver.try_recv().ok()).collect()
    }
}

impl McpClient {
    /// Waits (at most `wait`) until this client has received `count` progress notifications.
    pub async fn wait_for_progress(&self, count: usize, wait: Duration) -> bool {
        let mut seen = self.progress.subscribe();
        tokio::time::timeout(wait, seen.wait_for(|n| *n >= count)).await.is_ok_and(|r| r.is_ok())
    }

    pub fn peer(&self) -> &rmcp::Peer<RoleClient> {
        self.service.peer()
    }

    /// The next `elicitation/create` the server sent (URL mode).
    pub async fn next_url_elicitation(&self) -> (String, String) {
        let request = tokio::time::timeout(Duration::from_secs(20), self.elicitations.lock().await.recv())
            .await
            .expect("an elicitation")
            .unwrap();
        match request {
            ElicitRequestParams::UrlElicitationParams { url, elicitation_id, .. } => (url, elicitation_id),
            other => panic!("expected a URL elicitation, got {other:?}"),
        }
    }

    pub async fn no_elicitation_was_sent(&self) -> bool {
        self.elicitations.lock().await.try_recv().is_err()
    }

    /// The URI of the next `notifications/resources/updated`.
    pub async fn next_resource_update(&self, wait: Duration) -> Option<String> {
        tokio::time::timeout(wait, self.updates.lock().await.recv()).await.ok().flatten()
    }

    /// The next `notifications/message` received.
    pub async fn next_log(&self, wait: Duration) -> Option<LogMessage> {
        tokio::time::timeout(wait, self.logs.lock().await.recv()).await.ok().flatten()
    }

    /// The next `notifications/elicitation/complete` id.
    pub async fn next_completion(&self, wait: Duration) -> Option<String> {
        tokio::time::timeout(wait, self.completions.lock().await.recv()).await.ok().flatten()
    }

    pub async fn call(
        &self,
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<rmcp::model::CallToolResult, rmcp::ServiceError> {
        let mut params = rmcp::model::CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments.as_object().cloned();
        // The service's `call_tool` (not the peer's) drives MCP 2026-07-28 `InputRequiredResult`
        // rounds through this client's handler; a 2025-11-25 session never gets one.
        self.service.call_tool(params).await
    }

    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// A `notifications/message` a test client received: its level (as sent), logger and data.
pub type LogMessage = (String, Option<String>, serde_json::Value);

pub struct RecordingClient {
    kind: ClientKind,
    elicitations: mpsc::UnboundedSender<ElicitRequestParams>,
    completions: mpsc::UnboundedSender<String>,
    updates: mpsc::UnboundedSender<String>,
    logs: mpsc::UnboundedSender<LogMessage>,
    progress: Arc<tokio::sync::watch::Sender<usize>>,
    form_answers: FormAnswers,
}

impl ClientHandler for RecordingClient {
    #[allow(deprecated, reason = "notifications/message is what the servers under test send")]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        let level = serde_json::to_value(params.level).unwrap().as_str().unwrap_or_default().to_owned();
        let _ = self.logs.send((level, params.logger, params.data));
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        let _ = self.updates.send(params.uri);
    }

    async fn on_progress(
        &self,
        _params: rmcp::model::ProgressNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        self.progress.send_modify(|n| *n += 1);
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = match self.kind {
            ClientKind::Url | ClientKind::UrlDeclining | ClientKind::Silent => Some(
                ElicitationCapability::new()
                    .with_form(FormElicitationCapability::default())
                    .with_url(UrlElicitationCapability::default()),
            ),
            ClientKind::FormOnly => Some(ElicitationCapability::new()),
            ClientKind::UrlOnly => Some(ElicitationCapability::new().with_url(UrlElicitationCapability::default())),
            ClientKind::NoElicitation => None,
        };
        ClientConfig::new(capabilities, Implementation::new("test-client", "1.0.0"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let queued = match &request {
            ElicitRequestParams::FormElicitationParams { .. } => self.form_answers.0.lock().unwrap().pop_front(),
            _ => None,
        };
        let _ = self.elicitations.send(request);
        if let Some(answer) = queued {
            return Ok(answer);
        }
        if self.kind == ClientKind::Silent {
            return std::future::pending().await;
        }
        Ok(ElicitResult::new(if self.kind == ClientKind::UrlDeclining {
            ElicitationAction::Decline
        } else {
            ElicitationAction::Accept
        }))
    }

    async fn on_custom_notification(&self, notification: CustomNotification, _ctx: NotificationContext<RoleClient>) {
        if notification.method == "notifications/elicitation/complete"
            && let Some(id) = notification.params.as_ref().and_then(|p| p.get("elicitationId")).and_then(|v| v.as_str())
        {
            let _ = self.completions.send(id.to_owned());
        }
    }
}

/// The error `tool` answers to `arguments`; a call that succeeds fails the test.
pub async fn refusal(client: &McpClient, tool: &str, arguments: Value) -> ErrorData {
    match client.call(tool, arguments.clone()).await {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("{tool} {arguments}: expected an error, got {other:?}"),
    }
}
