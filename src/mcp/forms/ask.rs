//! Asking a form ([`ask`]): `elicitation/create` in form mode on the tool call's own stream,
//! accept, decline and cancel told apart, and the content checked against the form before
//! anything uses it. Only clients that declared form mode are asked ([`form_mode`]).

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ProtocolVersion};
use rmcp::service::{ElicitationMode, Peer, ServiceError};
use tokio_util::sync::CancellationToken;

use super::content::Answers;
use super::field::ContentError;
use super::schema::{FormSchema, SchemaError};

/// Whether this client may be sent a form: it declared `elicitation.form` (or an empty
/// `elicitation: {}`), on a revision that still has server-to-client requests.
pub fn form_mode(peer: &Peer<RoleServer>) -> bool {
    let stateless = peer.peer_info().is_some_and(|info| info.protocol_version >= ProtocolVersion::V_2026_07_28);
    !stateless && peer.supported_elicitation_modes().contains(&ElicitationMode::Form)
}

/// How the user answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Submitted, and the content fits the form.
    Accepted(Answers),
    /// Explicitly said no.
    Declined,
    /// Dismissed without choosing (or the tool call was cancelled meanwhile).
    Cancelled,
}

#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// The client did not declare form mode: the caller takes its non-form path.
    #[error("this client does not take forms")]
    Unsupported,
    /// Accepted, but the content does not fit the form; never used.
    #[error("the answer does not fit the form: {0}")]
    Invalid(#[from] ContentError),
    #[error("no answer to the form in time")]
    TimedOut,
    #[error("the client could not show the form ({0})")]
    Failed(String),
    #[error("the form is invalid: {0}")]
    Schema(#[from] SchemaError),
    /// MCP 2026-07-28: the question goes out as an `InputRequiredResult`; the answer comes with
    /// the client's retry ([`crate::mcp::input_required`]).
    #[error("the question is asked in an InputRequiredResult")]
    InputRequired(Box<rmcp::model::InputRequiredResult>),
    /// The server began to stop while the question was open.
    #[error("the broker is stopping")]
    Stopping,
}

/// Asks `form` with `message` and waits up to `timeout` (or until `cancel` fires).
pub async fn ask(
    peer: &Peer<RoleServer>,
    cancel: &CancellationToken,
    message: impl Into<String>,
    form: &FormSchema,
    timeout: Duration,
) -> Result<Reply, AskError> {
    if !form_mode(peer) {
        return Err(AskError::Unsupported);
    }
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message.into(),
        requested_schema: form.to_rmcp()?,
    };
    let result = tokio::select! {
        _ = cancel.cancelled() => return Ok(Reply::Cancelled),
        result = peer.create_elicitation_with_timeout(params, Some(timeout)) => result,
    };
    let result = result.map_err(|error| match error {
        ServiceError::Timeout { .. } => AskError::TimedOut,
        other => AskError::Failed(other.to_string()),
    })?;
    Ok(match result.action {
        ElicitationAction::Accept => Reply::Accepted(form.validate(result.content.as_ref())?),
        ElicitationAction::Decline => Reply::Declined,
        _ => Reply::Cancelled,
    })
}
