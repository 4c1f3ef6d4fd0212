//! `connect_account`, and the "this needs a connection" answer every tool shares.
//!
//! MCP 2025-11-25 client/elicitation §URL mode: with a client that declared `elicitation.url`,
//! `connect_account` sends `elicitation/create {mode:"url"}` on the request's own stream and
//! waits (bounded, with progress notifications) for the browser flow to finish; other tools
//! answer `-32042` so the client can open the link and retry. Clients without URL mode get an
//! `isError` result with the link as text. The database row is the truth: a retried call
//! succeeds from the stored grant whether or not any notification arrived.

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ElicitationAction, ErrorData, ProgressNotificationParam};
use rmcp::service::{ElicitationError, RequestContext};
use serde_json::json;

use super::connections::{internal, unknown_provider};
use super::elicitation::{self, Requester};
use super::server::{BrokerServer, Caller, error_result, text_result};
use super::tools::ConnectArgs;
use crate::config::ProviderConfig;
use crate::domain::Scopes;
use crate::oauth::tokens::{self, TokenError};
use crate::store::authorizations::{AuthorizationRow, AuthorizationStatus};

/// How often a waiting call re-reads the row and reports progress.
const WAIT_TICK: Duration = Duration::from_secs(5);

/// What a tool should do about a missing connection.
pub(crate) enum Needed {
    /// Connected with the scopes asked for.
    Ready,
    /// The user must (re)connect, requesting these scopes.
    Connect(Scopes),
    /// A result to return as is (provider down, etc.).
    Answer(CallToolResult),
}

impl BrokerServer {
    pub(crate) async fn connect_account(
        &self,
        caller: &Caller,
        args: ConnectArgs,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(provider) = self.state.providers.find(&args.provider) else {
            return Ok(error_result(unknown_provider(&self.state.providers.ids(), &args.provider)));
        };
        let requested = match &args.scopes {
            Some(list) => match Scopes::parse(list) {
                Ok(s) => s,
                Err(e) => return Ok(error_result(e.to_string())),
            },
            None => provider.default_scopes.clone(),
        };
        let scopes = match self.needed(caller, provider, &requested).await? {
            Needed::Ready => return self.connected_result(caller, provider).await,
            Needed::Answer(result) => return Ok(result),
            Needed::Connect(scopes) => scopes,
        };
        let row = self.authorization(caller, provider, &scopes).await?;
        if !caller.url_mode {
            return Ok(error_result(elicitation::manual_connect_text(&self.state, &row, provider, &scopes)));
        }
        // Subscribe before asking, so a fast browser cannot finish unseen.
        let mut events = self.state.events.subscribe();
        let url = elicitation::connect_url(&self.state, &row.id);
        let asked = ctx
            .peer
            .elicit_url_with_timeout(
                elicitation::connect_message(provider, &scopes),
                url,
                row.id.clone(),
                Some(self.state.config.connect_wait),
            )
            .await;
        match asked {
            Ok(ElicitationAction::Accept) => {}
            Ok(ElicitationAction::Decline) => {
                let now = self.state.now();
                let _ = self
                    .state
                    .store
                    .finish_authorization(&row.id, AuthorizationStatus::Declined, Some("declined_in_client"), now)
                    .await;
                return Ok(error_result(format!("You declined to connect {}.", provider.display_name)));
            }
            Ok(_) => {
                return Ok(error_result(format!(
                    "Connecting {} was cancelled. Call connect_account again when you are ready.",
                    provider.display_name
                )));
            }
            // A client on a revision without server-to-client requests (2026-07-28): the
            // error form still works.
            Err(ElicitationError::CapabilityNotSupported) | Err(ElicitationError::Service(_)) => {
                return Err(elicitation::url_elicitation_required(&self.state, &row, provider, &scopes));
            }
            Err(other) => return Err(internal(other)),
        }
        self.log(
            &ctx.peer,
            super::server::LogLevel::Notice,
            json!({"message": "waiting for the user to approve in the browser", "provider": provider.id.as_str(), "elicitationId": row.id}),
        )
        .await;
        self.wait_for_browser(caller, provider, &row, &mut events, ctx).await
    }

    /// Waits for the authorization row to reach a final state, bounded by `connect_wait`,
    /// ending early if the client cancels the call.
    async fn wait_for_browser(
        &self,
        caller: &Caller,
        provider: &ProviderConfig,
        row: &AuthorizationRow,
        events: &mut tokio::sync::broadcast::Receiver<crate::events::AuthorizationFinished>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let deadline = tokio::time::Instant::now() + self.state.config.connect_wait;
        let progress_token = ctx.meta.get_progress_token();
        let mut ticks = 0u32;
        loop {
            if let Some(done) = self.final_outcome(caller, provider, &row.id).await? {
                return Ok(done);
            }
            tokio::select! {
                _ = ctx.ct.cancelled() => return Ok(error_result("Cancelled.")),
                _ = tokio::time::sleep_until(deadline) => {
                    return Ok(error_result(format!(
                        "Still waiting for you to approve in the browser. Finish at {} and call connect_account again.",
                        elicitation::connect_url(&self.state, &row.id)
                    )));
                }
                _ = tokio::time::sleep(WAIT_TICK) => {
                    ticks += 1;
                    if let Some(token) = &progress_token {
                        let note = ProgressNotificationParam::new(token.clone(), f64::from(ticks))
                            .with_message(format!("Waiting for you to approve {} in the browser", provider.display_name));
                        let _ = ctx.peer.notify_progress(note).await;
                    }
                }
                event = events.recv() => {
                    // Any signal (or a lag) is a reason to re-read the row; the row decides.
                    let _ = event;
                }
            }
        }
    }

    /// The tool result once the row has finished, or `None` while it is still open.
    async fn final_outcome(
        &self,
        caller: &Caller,
        provider: &ProviderConfig,
        id: &str,
    ) -> Result<Option<CallToolResult>, ErrorData> {
        let row = self.state.store.authorization(id).await.map_err(internal)?;
        let Some(row) = row else {
            return Ok(Some(error_result("The connect link disappeared; call connect_account again.")));
        };
        Ok(match row.status() {
            Some(AuthorizationStatus::Completed) => Some(self.connected_result(caller, provider).await?),
            Some(AuthorizationStatus::Declined) => {
                Some(error_result(format!("You declined to connect {}.", provider.display_name)))
            }
            Some(AuthorizationStatus::Failed) => Some(error_result(format!(
                "Connecting {} failed ({}). Call connect_account to try again.",
                provider.display_name,
                row.failure.as_deref().unwrap_or("unknown reason")
            ))),
            _ if row.is_expired(self.state.now()) => {
                Some(error_result("The connect link expired; call connect_account again."))
            }
            _ => None,
        })
    }

    async fn connected_result(&self, caller: &Caller, provider: &ProviderConfig) -> Result<CallToolResult, ErrorData> {
        let grant = self.state.store.grant(&caller.user.user_id, provider.id.as_str()).await.map_err(internal)?;
        let Some(grant) = grant else {
            return Ok(error_result(format!("Not connected to {}.", provider.display_name)));
        };
        let account = grant.account_label.as_deref().map(|a| format!(" as {a}")).unwrap_or_default();
        let mut result =
            text_result(format!("Connected to {}{account} with scopes: {}.", provider.display_name, grant.scopes));
        result.structured_content = Some(json!({
            "provider": provider.id.as_str(),
            "connected": true,
            "account": grant.account_label,
            "scopes": grant.scopes.split_whitespace().collect::<Vec<_>>(),
        }));
        Ok(result)
    }

    /// Whether (user, provider) has a usable grant with `required` scopes.
    pub(crate) async fn needed(
        &self,
        caller: &Caller,
        provider: &ProviderConfig,
        required: &Scopes,
    ) -> Result<Needed, ErrorData> {
        match tokens::access_token(&self.state, &caller.user.user_id, provider, required).await {
            Ok(_) => Ok(Needed::Ready),
            Err(TokenError::NotConnected) | Err(TokenError::NeedsReconsent) => Ok(Needed::Connect(required.clone())),
            // Ask for what they have plus what is missing, so the new grant replaces the old
            // without losing scopes.
            Err(TokenError::MissingScopes { granted, .. }) => Ok(Needed::Connect(granted.union(required))),
            Err(TokenError::ProviderUnavailable) => Ok(Needed::Answer(error_result(format!(
                "{} is not answering right now; try again in a moment.",
                provider.display_name
            )))),
            Err(TokenError::ProviderRefused(why)) => {
                Ok(Needed::Answer(error_result(format!("{} refused: {why}", provider.display_name))))
            }
            Err(TokenError::Internal(e)) => Err(internal(e)),
        }
    }

    /// An open authorization row for this request, remembered for the completion notification.
    pub(crate) async fn authorization(
        &self,
        caller: &Caller,
        provider: &ProviderConfig,
        scopes: &Scopes,
    ) -> Result<AuthorizationRow, ErrorData> {
        let who = Requester {
            user_id: &caller.user.user_id,
            client_name: caller.client_name.as_deref(),
            mcp_session: caller.session_id.as_deref(),
        };
        let row = elicitation::ensure_authorization(&self.state, &who, provider, scopes).await.map_err(internal)?;
        self.remember_elicitation(&row.id);
        Ok(row)
    }

    /// For tools other than `connect_account`: `-32042` to URL-capable clients, else text.
    pub(crate) async fn connection_required(
        &self,
        caller: &Caller,
        provider: &ProviderConfig,
        scopes: &Scopes,
    ) -> Result<CallToolResult, ErrorData> {
        let row = self.authorization(caller, provider, scopes).await?;
        if caller.url_mode {
            Err(elicitation::url_elicitation_required(&self.state, &row, provider, scopes))
        } else {
            Ok(error_result(elicitation::manual_connect_text(&self.state, &row, provider, scopes)))
        }
    }
}
