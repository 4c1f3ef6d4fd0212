//! `connect_account`, and the "this needs a connection" answer every tool shares.
//!
//! MCP 2025-11-25 client/elicitation §URL mode: with a client that declared `elicitation.url`,
//! `connect_account` sends `elicitation/create {mode:"url"}` on the request's own stream and
//! waits (bounded, with progress notifications) for the browser flow to finish; other tools
//! answer `-32042` so the client can open the link and retry. MCP 2026-07-28 has neither: every
//! tool answers an `InputRequiredResult` with the link, and the client's retry waits
//! ([`super::asking`], [`BrokerServer::after_browser`]). Clients without URL mode get an
//! `isError` result with the link as text. The database row is the truth: a retried call
//! succeeds from the stored grant whether or not any notification arrived.
//!
//! §Form mode: when the user already holds an account at the provider, `connect_account`
//! without `scopes` asks which scopes to request (multi-select, what they have plus the
//! defaults ticked) and, without `account`, which account — one of theirs or another one — in
//! one form. The first connection asks nothing: the consent page shows the scopes, and clients
//! expect the link straight away. Decline or cancel connects nothing and changes nothing.
//! Without form mode: the named or default scopes, and with several accounts an `isError`
//! asking for `account`.

use rmcp::RoleServer;
use rmcp::model::{CallToolResult, ElicitationAction, ErrorData, ProgressNotificationParam};
use rmcp::service::{ElicitationError, RequestContext};
use serde_json::json;
use tokio::time::Instant;

use crate::broker::access::{self, Access, Standing};
use crate::broker::authorizations::{self, Ask};
use crate::broker::connections;
use crate::broker::tokens::AccessToken;
use crate::config::ProviderConfig;
use crate::domain::Scopes;
use crate::mcp::elicitation;
use crate::mcp::forms::questions::{self, AccountQuestion, Picked, SCOPES, account_name, account_shown};
use crate::mcp::forms::{self, FormSchema, Reply};
use crate::mcp::handler::{BrokerServer, Caller};
use crate::mcp::input_required::state::refused;
use crate::mcp::results::{Unfinished, error_result, text_result};
use crate::mcp::tools::connections::{find_account, several_accounts};
use crate::mcp::tools::failure::tool_failed;
use crate::mcp::tools::{CONNECT_ACCOUNT, ConnectArgs, unknown_provider};
use crate::store::authorizations::{AuthorizationKind, AuthorizationRow, AuthorizationStatus};
use crate::store::grants::GrantRow;

/// Which account `connect_account` works on.
enum Target {
    /// `grants[i]`: reconnect it if it lacks the scopes.
    Existing(usize),
    /// Another account (under this name, if the caller gave one).
    New(Option<String>),
}

/// `(id, version)` of the user's grants before a connection, to tell which one it produced.
type Snapshot = Vec<(String, i64)>;

impl BrokerServer {
    pub(crate) async fn connect_account(
        &self,
        caller: &Caller,
        args: ConnectArgs,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, Unfinished> {
        let Some(provider) = self.state.app.core.providers.find(&args.provider) else {
            return Ok(error_result(unknown_provider(&self.state.app.core.providers.ids(), &args.provider)));
        };
        let named_scopes = match &args.scopes {
            Some(list) => match Scopes::parse(list) {
                Ok(s) => Some(s),
                Err(e) => return Ok(error_result(e.to_string())),
            },
            None => None,
        };
        // A scope the provider does not offer is invalid input, refused before any row or
        // provider sees it (see `providers::scopes`).
        if let Some(scopes) = &named_scopes {
            crate::providers::scopes::check(&provider, scopes).map_err(|e| {
                ErrorData::invalid_params(e.to_string(), Some(serde_json::json!({"argument": "scopes"})))
            })?;
        }
        let grants =
            connections::accounts(&self.state.app.core, &caller.user.user_id, &provider).await.map_err(tool_failed)?;
        let (target, requested) =
            match self.connect_choice(caller, &provider, &args, named_scopes, &grants, ctx).await? {
                Ok(choice) => choice,
                Err(result) => return Ok(result),
            };
        let (scopes, hint) = match target {
            Target::Existing(i) => {
                let grant = &grants[i];
                match self.standing(caller, &provider, Some(account_name(grant)), &requested).await? {
                    Standing::Ready(_) => return Ok(connected_result(&provider, grant)),
                    Standing::Unavailable { retry_after } => {
                        return Ok(crate::mcp::tools::failure::provider_unavailable(&provider, retry_after));
                    }
                    Standing::Refused(why) => {
                        return Ok(error_result(format!("{} refused: {why}", provider.display_name)));
                    }
                    Standing::AllowClient(grant) => {
                        let before: Snapshot = grants.iter().map(|g| (g.id.clone(), g.version)).collect();
                        return self
                            .start_connect(caller, &provider, &grant.scopes, Ask::UseGrant(&grant), None, &before, ctx)
                            .await;
                    }
                    standing @ (Standing::NotConnected(_) | Standing::MoreScopes { .. }) => {
                        let scopes = match standing {
                            Standing::MoreScopes { ask, .. } => ask,
                            _ => requested,
                        };
                        let hint = grant
                            .account_label
                            .as_ref()
                            .map(|_| format!("At {}, sign in as {}.", provider.display_name, account_shown(grant)));
                        (scopes, hint)
                    }
                }
            }
            Target::New(Some(name)) => (requested, Some(format!("At {}, sign in as “{name}”.", provider.display_name))),
            Target::New(None) if !grants.is_empty() => {
                (requested, Some(format!("At {}, sign in with the account to add.", provider.display_name)))
            }
            Target::New(None) => (requested, None),
        };
        let before: Snapshot = grants.iter().map(|g| (g.id.clone(), g.version)).collect();
        self.start_connect(caller, &provider, &scopes, Ask::Connect, hint.as_deref(), &before, ctx).await
    }

    /// The account and scopes to connect: from the arguments, from a form (see the module
    /// doc), or an answer to return as is.
    async fn connect_choice(
        &self,
        caller: &Caller,
        provider: &ProviderConfig,
        args: &ConnectArgs,
        named_scopes: Option<Scopes>,
        grants: &[GrantRow],
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Result<(Target, Scopes), CallToolResult>, Unfinished> {
        let named_target = args.account.as_deref().map(|name| match find_account(grants, name) {
            Some(i) => Target::Existing(i),
            None => Target::New(Some(name.to_owned())),
        });
        // Which scopes, when the caller named none and the provider offers more than its
        // defaults: asked on a first connection too (the consent page then shows the choice).
        let ask_scopes = named_scopes.is_none() && questions::offers_more_than_defaults(provider);
        if grants.is_empty() && !(ask_scopes && caller.form_mode) {
            let scopes = named_scopes.unwrap_or_else(|| provider.default_scopes.clone());
            return Ok(Ok((named_target.unwrap_or(Target::New(None)), scopes)));
        }
        let ask_account = !grants.is_empty() && named_target.is_none() && (grants.len() >= 2 || ask_scopes);
        if !caller.form_mode || !(ask_scopes || ask_account) {
            let target = match named_target {
                Some(target) => target,
                None if grants.len() == 1 => Target::Existing(0),
                None => return Ok(Err(several_accounts(provider, grants, CONNECT_ACCOUNT))),
            };
            return Ok(Ok((target, named_scopes.unwrap_or_else(|| provider.default_scopes.clone()))));
        }
        let default = match &named_target {
            Some(Target::Existing(i)) => Some(*i),
            Some(Target::New(_)) => None,
            None => questions::most_recent(grants),
        };
        let question = ask_account.then(|| AccountQuestion::new(grants, true, default, provider));
        let mut fields: Vec<forms::Field> = question.iter().map(|q| q.field.clone()).collect();
        if ask_scopes {
            // Ticked: what the (default) account holds plus the defaults. Unticking a held scope
            // does not remove it; disconnecting does.
            let held = default.map(|i| grants[i].scopes.clone()).unwrap_or_default();
            fields.push(questions::scopes_field(provider, &provider.default_scopes.union(&held)));
        }
        let form = FormSchema::new(fields).map_err(tool_failed)?;
        let message = match (ask_account, ask_scopes) {
            (true, true) => format!("Connect {}: which account, and what may tools do there?", provider.display_name),
            (true, false) => format!("Connect {}: which account?", provider.display_name),
            _ => format!("Connect {}: what may tools do there on your behalf?", provider.display_name),
        };
        let reply = self.ask_form(caller, ctx, message, &form).await;
        self.log_reply(ctx, CONNECT_ACCOUNT, provider, &reply).await;
        let answers = match reply {
            Ok(Reply::Accepted(answers)) => answers,
            Ok(Reply::Declined) => {
                return Ok(Err(error_result(format!(
                    "You declined. Nothing was connected, and your {} connections are unchanged.",
                    provider.display_name
                ))));
            }
            Ok(Reply::Cancelled) => {
                return Ok(Err(error_result(format!(
                    "Connecting {} was cancelled; nothing changed. Call connect_account again when you are ready.",
                    provider.display_name
                ))));
            }
            Err(error) => return questions::no_answer(error, "Nothing was connected.").map(Err),
        };
        let target = match (named_target, question.as_ref().and_then(|q| q.picked(&answers))) {
            (Some(target), _) => target,
            (None, Some(Picked::Existing(i))) => Target::Existing(i),
            (None, Some(Picked::New)) => Target::New(None),
            (None, None) if grants.is_empty() => Target::New(None),
            (None, None) if grants.len() == 1 => Target::Existing(0),
            (None, None) => return Ok(Err(error_result("No account was chosen. Nothing was connected."))),
        };
        let scopes = match answers.choices(SCOPES) {
            Some(chosen) => match Scopes::parse(chosen).map_err(|e| e.to_string()).and_then(|scopes| {
                crate::providers::scopes::check(provider, &scopes).map(|()| scopes).map_err(|e| e.to_string())
            }) {
                Ok(scopes) => scopes,
                Err(e) => {
                    return Ok(Err(error_result(format!(
                        "Your answer could not be used: {e}. Nothing was connected."
                    ))));
                }
            },
            None => named_scopes.unwrap_or_else(|| provider.default_scopes.clone()),
        };
        Ok(Ok((target, scopes)))
    }

    /// Opens (or reuses) an authorization and sends the user to the browser: inline URL
    /// elicitation and a bounded wait (2025-11-25), an `InputRequiredResult` whose retry waits
    /// (2026-07-28), or the link as text.
    #[allow(clippy::too_many_arguments)]
    async fn start_connect(
        &self,
        caller: &Caller,
        provider: &ProviderConfig,
        scopes: &Scopes,
        ask: Ask<'_>,
        hint: Option<&str>,
        before: &Snapshot,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, Unfinished> {
        let with_hint = |text: String| match hint {
            Some(hint) => format!("{text} {hint}"),
            None => text,
        };
        let row = self.authorization(caller, provider, scopes, ask).await?;
        if !caller.url_mode || caller.round.is_some() {
            return self.send_to_browser(caller, provider, &row, hint);
        }
        // Subscribe before asking, so a fast browser cannot finish unseen.
        let mut events = self.state.app.core.events.subscribe();
        let url = authorizations::connect_url(&self.state.app.core, &row.id);
        let still = |row: &AuthorizationRow| {
            format!(
                "Still waiting for you to approve in the browser. Finish at {} and call connect_account again.",
                authorizations::connect_url(&self.state.app.core, &row.id)
            )
        };
        let asked = tokio::select! {
            // The server is stopping while the client still shows the link: answer now (the
            // link stays valid; the next call, to any instance, picks it up).
            _ = self.state.app.draining.cancelled() => return Ok(error_result(still(&row))),
            asked = ctx.peer.elicit_url_with_timeout(
                with_hint(elicitation::ask_message(&row, provider, scopes)),
                url,
                row.id.clone(),
                Some(self.state.app.core.config.connect_wait),
            ) => asked,
        };
        match asked {
            Ok(ElicitationAction::Accept) => {}
            Ok(ElicitationAction::Decline) => return Ok(self.declined_in_client(&row, provider).await),
            Ok(_) => return Ok(error_result(cancelled_text(provider, CONNECT_ACCOUNT))),
            // A client that cannot take the request now: the error form still works.
            Err(ElicitationError::CapabilityNotSupported) | Err(ElicitationError::Service(_)) => {
                return Err(elicitation::url_elicitation_required(&self.state.app, &row, provider, scopes).into());
            }
            Err(other) => return Err(tool_failed(other).into()),
        }
        self.log(
            ctx,
            crate::mcp::logging::LogLevel::Notice,
            json!({"message": "waiting for the user to approve in the browser", "provider": provider.id.as_str(), "elicitationId": row.id}),
        )
        .await;
        let deadline = Instant::now() + self.state.app.core.config.connect_wait;
        match self.wait_for_row(&row.id, &provider.display_name, deadline, &mut events, ctx).await? {
            Waited::Finished => Ok(self
                .final_outcome(caller, provider, &row.id, before)
                .await?
                .unwrap_or_else(|| error_result(still(&row)))),
            Waited::Cancelled => Ok(error_result("Cancelled.")),
            // The server is stopping, or the wait is over: the link stays valid and the next
            // call (to any instance) picks it up.
            Waited::Stopping | Waited::TimedOut => Ok(error_result(still(&row))),
        }
    }

    /// The user said no in the client: the row ends declined, and the result says so.
    async fn declined_in_client(&self, row: &AuthorizationRow, provider: &ProviderConfig) -> CallToolResult {
        let now = self.state.app.core.now();
        let _ = self
            .state
            .app
            .core
            .store
            .authorizations()
            .finish(&row.id, AuthorizationStatus::Declined, Some("declined_in_client"), now)
            .await;
        error_result(declined_text(row, provider))
    }

    /// MCP 2026-07-28: a retry whose state sent the user to the browser (see
    /// [`crate::mcp::input_required`]). A `decline` in `inputResponses` ends it at once;
    /// otherwise the retry waits, bounded by `mrtr_wait`, for the row to finish. `None` once the
    /// user completed it: the tool runs, now with the grant or the permission. For
    /// `connect_account` the connection is the result; declined, failed or expired, the outcome;
    /// still open, an `InputRequiredResult` with the same state, and the client retries.
    pub(crate) async fn after_browser(
        &self,
        caller: &Caller,
        tool: &str,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Option<CallToolResult>, Unfinished> {
        let Some(round) = &caller.round else { return Ok(None) };
        let Some(id) = round.authorization() else { return Ok(None) };
        // Subscribe before the first read, so a browser finishing in between is not missed.
        let mut events = self.state.app.core.events.subscribe();
        let row = self.state.app.core.store.authorizations().by_id(id).await.map_err(tool_failed)?;
        // The state is bound to this user already; a row of anyone else is never described.
        let Some(row) = row.filter(|r| r.user_id == caller.user.user_id) else {
            return Err(refused().into());
        };
        if row.kind == AuthorizationKind::Server {
            return self.after_server_approval(caller, &row, tool, ctx, &mut events).await;
        }
        let Some(provider) = self.state.app.core.providers.find(&row.provider) else {
            return Ok(Some(error_result(unknown_provider(&self.state.app.core.providers.ids(), &row.provider))));
        };
        match round.authorize_response() {
            Some(ElicitationAction::Decline) => return Ok(Some(self.declined_in_client(&row, &provider).await)),
            Some(ElicitationAction::Cancel) => return Ok(Some(error_result(cancelled_text(&provider, tool)))),
            _ => {}
        }
        let deadline = Instant::now() + self.state.app.core.config.mrtr_wait;
        match self.wait_for_row(&row.id, &provider.display_name, deadline, &mut events, ctx).await? {
            Waited::Finished => {}
            Waited::Cancelled => return Ok(Some(error_result("Cancelled."))),
            // A stopping server answers at once: the client retries, to another instance.
            Waited::Stopping | Waited::TimedOut => return Err(round.still_waiting().into()),
        }
        let row = self.state.app.core.store.authorizations().by_id(id).await.map_err(tool_failed)?;
        if tool != CONNECT_ACCOUNT && row.as_ref().is_some_and(|r| r.status == AuthorizationStatus::Completed) {
            return Ok(None);
        }
        let outcome = self.final_outcome(caller, &provider, id, &Vec::new()).await?;
        Ok(Some(outcome.unwrap_or_else(|| {
            error_result(format!("Connecting {} did not finish; call {tool} again.", provider.display_name))
        })))
    }

    /// [`Self::after_browser`] for a row that approves only a (client, server) pair:
    /// `None` once approved, so the server's tool runs.
    async fn after_server_approval(
        &self,
        caller: &Caller,
        row: &AuthorizationRow,
        tool: &str,
        ctx: &RequestContext<RoleServer>,
        events: &mut tokio::sync::broadcast::Receiver<crate::events::AuthorizationFinished>,
    ) -> Result<Option<CallToolResult>, Unfinished> {
        let Some(round) = &caller.round else { return Ok(None) };
        let server = crate::broker::gateway_consent::server_named(row);
        match round.authorize_response() {
            Some(ElicitationAction::Decline) => {
                let now = self.state.app.core.now();
                let _ = self
                    .state
                    .app
                    .core
                    .store
                    .authorizations()
                    .finish(&row.id, AuthorizationStatus::Declined, Some("declined_in_client"), now)
                    .await;
                return Ok(Some(error_result(format!("You declined to let this client call the server {server}."))));
            }
            Some(ElicitationAction::Cancel) => return Ok(Some(error_result("Cancelled."))),
            _ => {}
        }
        let deadline = Instant::now() + self.state.app.core.config.mrtr_wait;
        let what = format!("the server {server}");
        match self.wait_for_row(&row.id, &what, deadline, events, ctx).await? {
            Waited::Finished => {}
            Waited::Cancelled => return Ok(Some(error_result("Cancelled."))),
            Waited::Stopping | Waited::TimedOut => return Err(round.still_waiting().into()),
        }
        let row = self.state.app.core.store.authorizations().by_id(&row.id).await.map_err(tool_failed)?;
        Ok(match row.map(|r| r.status) {
            Some(AuthorizationStatus::Completed) => None,
            Some(AuthorizationStatus::Declined) => {
                Some(error_result(format!("You declined to let this client call the server {server}.")))
            }
            _ => Some(error_result(format!("Approving the server {server} did not finish; call {tool} again."))),
        })
    }

    /// Waits until authorization `id` has finished (or expired), `deadline` passes, the call is
    /// cancelled or the server starts stopping; sends progress meanwhile when the client asked
    /// for it. Every signal (or a lag) is a reason to read the row again: the row decides.
    async fn wait_for_row(
        &self,
        id: &str,
        what: &str,
        deadline: Instant,
        events: &mut tokio::sync::broadcast::Receiver<crate::events::AuthorizationFinished>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Waited, ErrorData> {
        let progress_token = ctx.meta.get_progress_token();
        let mut ticks = 0u32;
        loop {
            let row = self.state.app.core.store.authorizations().by_id(id).await.map_err(tool_failed)?;
            let open = row.as_ref().is_some_and(|row| {
                !matches!(
                    row.status,
                    AuthorizationStatus::Completed | AuthorizationStatus::Declined | AuthorizationStatus::Failed
                ) && !row.is_expired(self.state.app.core.now())
            });
            if !open {
                return Ok(Waited::Finished);
            }
            tokio::select! {
                _ = ctx.ct.cancelled() => return Ok(Waited::Cancelled),
                _ = self.state.app.draining.cancelled() => return Ok(Waited::Stopping),
                _ = tokio::time::sleep_until(deadline) => return Ok(Waited::TimedOut),
                _ = tokio::time::sleep(self.state.app.core.config.progress_interval) => {
                    ticks += 1;
                    if let Some(token) = &progress_token {
                        let note = ProgressNotificationParam::new(token.clone(), f64::from(ticks))
                            .with_message(format!("Waiting for you to approve {what} in the browser"));
                        let _ = ctx.peer.notify_progress(note).await;
                    }
                }
                event = events.recv() => {
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
        before: &Snapshot,
    ) -> Result<Option<CallToolResult>, ErrorData> {
        let row = self.state.app.core.store.authorizations().by_id(id).await.map_err(tool_failed)?;
        let Some(row) = row else {
            return Ok(Some(error_result("The connect link disappeared; call connect_account again.")));
        };
        Ok(match row.status {
            AuthorizationStatus::Completed => match row.grant_id.as_deref() {
                // Consent-only: the grant the user allowed, whatever else changed meanwhile.
                Some(grant_id) if row.kind == AuthorizationKind::Consent => {
                    let grants = connections::accounts(&self.state.app.core, &caller.user.user_id, provider)
                        .await
                        .map_err(tool_failed)?;
                    Some(match grants.iter().find(|g| g.id == grant_id) {
                        Some(grant) => connected_result(provider, grant),
                        None => error_result(format!(
                            "That {} connection was removed meanwhile; call connect_account again.",
                            provider.display_name
                        )),
                    })
                }
                _ => Some(self.completed_result(caller, provider, before).await?),
            },
            AuthorizationStatus::Declined => Some(error_result(declined_text(&row, provider))),
            AuthorizationStatus::Failed => Some(error_result(format!(
                "Connecting {} failed ({}). Call connect_account to try again.",
                provider.display_name,
                row.failure.as_deref().unwrap_or("unknown reason")
            ))),
            _ if row.is_expired(self.state.app.core.now()) => {
                Some(error_result("The connect link expired; call connect_account again."))
            }
            _ => None,
        })
    }

    /// The result once a connection completed: the grant it created or changed (the row does
    /// not record which account the user picked at the provider).
    async fn completed_result(
        &self,
        caller: &Caller,
        provider: &ProviderConfig,
        before: &Snapshot,
    ) -> Result<CallToolResult, ErrorData> {
        let grants =
            connections::accounts(&self.state.app.core, &caller.user.user_id, provider).await.map_err(tool_failed)?;
        let changed = grants
            .iter()
            .filter(|g| !before.iter().any(|(id, version)| *id == g.id && *version == g.version))
            .max_by_key(|g| (g.updated_at, g.version));
        let grant = changed.or_else(|| questions::most_recent(&grants).map(|i| &grants[i]));
        Ok(match grant {
            Some(grant) => connected_result(provider, grant),
            None => error_result(format!("Not connected to {}.", provider.display_name)),
        })
    }

    /// Where this client stands with (user, provider, account) and `required` scopes
    /// (`account` `None`: the most recently updated one): the core's answer.
    pub(crate) async fn standing(
        &self,
        caller: &Caller,
        provider: &ProviderConfig,
        account: Option<&str>,
        required: &Scopes,
    ) -> Result<Standing, ErrorData> {
        access::standing(&self.state.app.core, &caller.user.user_id, &caller.user.client, provider, account, required)
            .await
            .map_err(tool_failed)
    }

    /// A token for (provider, account) with `required` scopes that this client may use, or what
    /// to answer instead: the core's [`Access`] translated — a connect or consent link
    /// (`-32042` to URL-capable clients, else as text), or why not now.
    pub(crate) async fn token_for_tool(
        &self,
        caller: &Caller,
        provider: &ProviderConfig,
        account: Option<&str>,
        required: &Scopes,
    ) -> Result<AccessToken, Result<CallToolResult, Unfinished>> {
        self.token_for_requester(caller, &caller.requester(), provider, account, required, None).await
    }

    /// [`Self::token_for_tool`] asking as `who` (a server's call carries the server whose pair
    /// the link approves too), with `hint` said beside the link.
    pub(crate) async fn token_for_requester(
        &self,
        caller: &Caller,
        who: &crate::broker::authorizations::Requester<'_>,
        provider: &ProviderConfig,
        account: Option<&str>,
        required: &Scopes,
        hint: Option<&str>,
    ) -> Result<AccessToken, Result<CallToolResult, Unfinished>> {
        let answer = access::access(&self.state.app.core, who, provider, account, required).await;
        let row = match answer.map_err(|e| Err(tool_failed(e).into()))? {
            Access::Ready(token) => return Ok(*token),
            Access::Unavailable { retry_after } => {
                return Err(Ok(crate::mcp::tools::failure::provider_unavailable(provider, retry_after)));
            }
            Access::Refused(why) => return Err(Ok(error_result(format!("{} refused: {why}", provider.display_name)))),
            Access::Connect { authorization, .. }
            | Access::MoreScopes { authorization, .. }
            | Access::AllowClient { authorization } => authorization,
        };
        self.remember_elicitation(&row.id);
        Err(self.send_to_browser(caller, provider, &row, hint))
    }

    /// An open authorization for this request, remembered for the completion notification.
    pub(crate) async fn authorization(
        &self,
        caller: &Caller,
        provider: &ProviderConfig,
        scopes: &Scopes,
        ask: Ask<'_>,
    ) -> Result<AuthorizationRow, ErrorData> {
        let row = authorizations::open(&self.state.app.core, &caller.requester(), provider, scopes, ask)
            .await
            .map_err(tool_failed)?;
        self.remember_elicitation(&row.id);
        Ok(row)
    }
}

/// How [`BrokerServer::wait_for_row`] ended.
enum Waited {
    /// The row finished or expired (or is gone): read it for the outcome.
    Finished,
    Cancelled,
    /// The server is stopping: answer now rather than hold the stop.
    Stopping,
    TimedOut,
}

fn cancelled_text(provider: &ProviderConfig, tool: &str) -> String {
    format!("Connecting {} was cancelled. Call {tool} again when you are ready.", provider.display_name)
}

fn declined_text(row: &AuthorizationRow, provider: &ProviderConfig) -> String {
    match row.kind {
        AuthorizationKind::Connect => format!("You declined to connect {}.", provider.display_name),
        AuthorizationKind::Consent => {
            format!("You declined to let this client use your {} connection.", provider.display_name)
        }
        AuthorizationKind::Server => {
            format!(
                "You declined to let this client call the server {}.",
                crate::broker::gateway_consent::server_named(row)
            )
        }
    }
}

fn connected_result(provider: &ProviderConfig, grant: &GrantRow) -> CallToolResult {
    let account = grant.account_label.as_deref().map(|a| format!(" as {a}")).unwrap_or_default();
    let mut result = text_result(format!(
        "Connected to {}{account} with scopes: {}.",
        provider.display_name,
        grant.scopes.to_space_separated()
    ));
    result.structured_content = Some(json!({
        "provider": provider.id.as_str(),
        "connected": true,
        "account": grant.account_label,
        "scopes": grant.scopes,
    }));
    result
}
