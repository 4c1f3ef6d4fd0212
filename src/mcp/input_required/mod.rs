//! MCP 2026-07-28 multi round-trip requests (SEP-2322): how a request of that revision asks the
//! user something — a browser link or a form — and how its retry carries the answer.
//!
//! A 2025-11-25 session asks by a nested `elicitation/create` and waits on it, or answers `-32042`
//! and later `notifications/elicitation/complete`. The 2026-07-28 revision has neither: the server
//! answers the request with an `InputRequiredResult` (`inputRequests` by key, and an opaque
//! `requestState`), and the client fulfils the requests and sends the *same* request again with
//! `inputResponses` and the state. Each request of that revision gets one [`Round`]: what its
//! state (if any) carried and what the client answered, and the way to ask the next question.
//!
//! The keys the broker uses in `inputRequests`:
//! - [`AUTHORIZE`]: a url-mode `elicitation/create` to the broker's own `/connect/…` page (the
//!   same page, with the same sign-in and phishing rules, as 2025-11-25's link). `accept` only
//!   means the user agreed to open it; the retry then waits (bounded by `mrtr_wait`) for the
//!   browser flow to finish — see `tools::retry`.
//! - [`QUESTION`]: a form-mode `elicitation/create` (which account, which scopes, confirm),
//!   checked against its form on the retry; a bad answer is asked again with the reason.
//!
//! A server behind the broker that asks the user by a round trip of its own gets its
//! `InputRequiredResult` relayed with a state of the broker's that carries the server's
//! ([`Round::ask_for_server`], `crate::mcp::gateway::forward::rounds`).
//!
//! A state that asked a question (the broker's or a server's) is spent when the answer to it is used, on every instance
//! (`store::request_states`): replaying it is refused. A state that only waits on the browser
//! is sent back unchanged while the user is still there ("no new link while the old one is
//! open"), and replaying it only waits again: the row decides.

pub(crate) mod state;

use std::sync::Mutex;

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, JsonObject,
};
use serde_json::{Map, Value};

use self::state::{Binding, Carried};
pub(crate) use self::state::{FlightRound, ServerRound};
use crate::clock::Timestamp;
use crate::crypto::Sealer;
use crate::mcp::forms::{Answers, ContentError, FormSchema, Reply, SchemaError};
use crate::state::AppState;

/// `inputRequests` key of the browser link.
pub const AUTHORIZE: &str = "authorize";
/// `inputRequests` key of a form question (a tool asks at most one form per round).
pub const QUESTION: &str = "question";

/// The request a [`Round`] belongs to.
pub(crate) struct RoundRequest<'a> {
    pub user_id: &'a str,
    /// The client's key ([`crate::domain::ClientIdentity::key`]).
    pub client: &'a str,
    pub method: &'a str,
    pub name: &'a str,
    pub arguments: Option<&'a JsonObject>,
    pub input_responses: Option<&'a InputResponses>,
    pub request_state: Option<&'a str>,
}

/// One 2026-07-28 request's part in a multi round-trip exchange.
pub(crate) struct Round {
    sealer: std::sync::Arc<Sealer>,
    binding: Binding,
    now: Timestamp,
    /// How long a state this request mints stays valid: the connect link's lifetime.
    ttl_seconds: i64,
    /// The state as the client sent it, sent back unchanged while the user is still busy.
    echoed: Option<String>,
    carried: Carried,
    /// The client's response to the browser link of the state's authorization.
    authorize_response: Option<ElicitationAction>,
    /// The client's answer to the question the state asked (already spent).
    answer: Option<ElicitResult>,
    /// Answers accepted so far — carried, plus this round's once checked — for the states this
    /// request hands out next.
    answers: Mutex<Map<String, Value>>,
}

impl std::fmt::Debug for Round {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // What the round is about, never what the state or the answers hold.
        f.debug_struct("Round")
            .field("retry", &self.echoed.is_some())
            .field("waits_on_browser", &self.carried.authorization.is_some())
            .field("asked", &self.carried.asked)
            .field("server_round", &self.carried.server.is_some())
            .field("flight", &self.carried.flight.is_some())
            .finish()
    }
}

impl Round {
    /// Reads the retry's state and responses. A state that does not open for this very request,
    /// or a question's state used before, is refused (`-32602`) before anything else happens.
    pub(crate) async fn open(state: &AppState, request: RoundRequest<'_>) -> Result<Self, ErrorData> {
        let binding = Binding::new(request.user_id, request.client, request.method, request.name, request.arguments);
        let now = state.core.now();
        let carried = match request.request_state {
            Some(sealed) => state::open(&state.core.sealer, &binding, sealed, now)?,
            None => Carried::default(),
        };
        let responses = request.input_responses.filter(|_| request.request_state.is_some());
        let response = |key: &str| -> Result<Option<ElicitResult>, ErrorData> {
            responses.and_then(|r| r.get(key)).map(|value| elicit_result(key, value)).transpose()
        };
        let answer = match carried.asked.as_deref() {
            Some(key) => response(key)?,
            None => None,
        };
        if answer.is_some() || carried.server.is_some() || carried.flight.is_some() {
            // Acted on once (an answer used, or a server's round carried back to it): a second
            // retry with this state is a replay.
            let spent = state
                .core
                .store
                .request_states()
                .spend(&carried.nonce, carried.expires_at, now)
                .await
                .map_err(crate::mcp::failure::tool_failed)?;
            if !spent {
                return Err(state::refused());
            }
        }
        let authorize_response = match carried.authorization {
            Some(_) => response(AUTHORIZE)?.map(|r| r.action),
            None => None,
        };
        Ok(Self {
            sealer: state.core.sealer.clone(),
            binding,
            now,
            ttl_seconds: state.core.config.authorization_ttl.as_secs() as i64,
            echoed: request.request_state.map(str::to_owned),
            answers: Mutex::new(carried.answers.clone()),
            carried,
            authorize_response,
            answer,
        })
    }

    /// The authorization this retry's state sent the user to, if any.
    pub(crate) fn authorization(&self) -> Option<&str> {
        self.carried.authorization.as_deref()
    }

    /// What the client answered to the browser link (decline ends the wait at once).
    pub(crate) fn authorize_response(&self) -> Option<&ElicitationAction> {
        self.authorize_response.as_ref()
    }

    /// The answer to the form question `key` asked with `form`, if this call has one: carried
    /// from an earlier round, or given in this retry. `None`: ask it ([`Round::ask_form`]).
    pub(crate) fn reply(&self, key: &str, form: &FormSchema) -> Option<Result<Reply, ContentError>> {
        let earlier = self.answers().get(key).cloned();
        if let Some(content) = earlier {
            return Some(form.validate(Some(&content)).map(Reply::Accepted));
        }
        let answer = self.answer.as_ref().filter(|_| self.carried.asked.as_deref() == Some(key))?;
        Some(match answer.action {
            ElicitationAction::Accept => form.validate(answer.content.as_ref()).map(|answers: Answers| {
                let content = answer.content.clone().unwrap_or_else(|| Value::Object(Map::new()));
                self.lock_answers().insert(key.to_owned(), content);
                Reply::Accepted(answers)
            }),
            ElicitationAction::Decline => Ok(Reply::Declined),
            _ => Ok(Reply::Cancelled),
        })
    }

    /// An `InputRequiredResult` asking `form` under `key`.
    pub(crate) fn ask_form(
        &self,
        key: &str,
        message: String,
        form: &FormSchema,
    ) -> Result<InputRequiredResult, SchemaError> {
        let params =
            ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema: form.to_rmcp()? };
        let carried = Carried { asked: Some(key.to_owned()), ..self.next_state() };
        Ok(self.input_required(key, params, carried))
    }

    /// An `InputRequiredResult` sending the user to `url` (the broker's page for authorization
    /// `authorization_id`); the retry waits on it.
    pub(crate) fn ask_to_open(&self, authorization_id: &str, message: String, url: String) -> InputRequiredResult {
        // The 2026-07-28 revision has no elicitationId; rmcp's type still has the field, and
        // leaves it empty when there is none.
        let params =
            ElicitRequestParams::UrlElicitationParams { meta: None, message, url, elicitation_id: String::new() };
        let carried = Carried { authorization: Some(authorization_id.to_owned()), ..self.next_state() };
        self.input_required(AUTHORIZE, params, carried)
    }

    /// The round trip of a server behind the broker this retry carries back, if any.
    pub(crate) fn server_round(&self) -> Option<&ServerRound> {
        self.carried.server.as_ref()
    }

    /// The server's question waiting mid-call that this retry answers, if any, and the
    /// client's answer to it (`None`: the client sent none).
    pub(crate) fn flight(&self) -> Option<(&FlightRound, Option<&ElicitResult>)> {
        self.carried.flight.as_ref().map(|flight| (flight, self.answer.as_ref()))
    }

    /// An `InputRequiredResult` asking a server's question (already worded for the client)
    /// under `flight.key`, for the call waiting in `flight` on the instance `home` names (a
    /// sealed tag, `crate::mcp::gateway::forward::flight_home`; none when this instance has no address
    /// for the others).
    pub(crate) fn ask_for_flight(
        &self,
        params: ElicitRequestParams,
        flight: FlightRound,
        home: Option<&str>,
    ) -> InputRequiredResult {
        let key = flight.key.clone();
        let carried = Carried { asked: Some(key.clone()), flight: Some(flight), ..self.next_state() };
        let mut result = self.input_required(&key, params, carried);
        if let (Some(home), Some(sealed)) = (home, result.request_state.take()) {
            result.request_state = Some(state::with_home(sealed, home));
        }
        result
    }

    /// An `InputRequiredResult` passing on a server's `requests` (already worded for the client),
    /// with `server` — the server's own state among it — sealed in the broker's state.
    pub(crate) fn ask_for_server(&self, requests: InputRequests, server: ServerRound) -> InputRequiredResult {
        let carried = Carried { server: Some(server), ..self.next_state() };
        let requests = (!requests.is_empty()).then_some(requests);
        InputRequiredResult::new(requests, Some(state::seal(&self.sealer, &self.binding, &carried)))
    }

    /// "Still waiting": no new request, the same state again, so the client retries and the
    /// next retry waits again.
    pub(crate) fn still_waiting(&self) -> InputRequiredResult {
        let state = self.echoed.clone().unwrap_or_else(|| state::seal(&self.sealer, &self.binding, &self.next_state()));
        InputRequiredResult::from_request_state(state)
    }

    fn input_required(&self, key: &str, params: ElicitRequestParams, carried: Carried) -> InputRequiredResult {
        let mut requests = InputRequests::new();
        requests.insert(key.to_owned(), InputRequest::Elicitation(ElicitRequest::new(params)));
        InputRequiredResult::new(Some(requests), Some(state::seal(&self.sealer, &self.binding, &carried)))
    }

    /// A fresh state: a new nonce, the full lifetime, and every answer so far.
    fn next_state(&self) -> Carried {
        Carried {
            nonce: crate::crypto::random_token(16),
            expires_at: self.now + self.ttl_seconds,
            authorization: None,
            asked: None,
            answers: self.answers(),
            server: None,
            flight: None,
        }
    }

    fn answers(&self) -> Map<String, Value> {
        self.lock_answers().clone()
    }

    fn lock_answers(&self) -> std::sync::MutexGuard<'_, Map<String, Value>> {
        // Only inserts happen under the lock: a poisoned map is still whole.
        self.answers.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// `inputResponses[key]` as an elicitation result, or `-32602` naming the key.
fn elicit_result(key: &str, value: &Value) -> Result<ElicitResult, ErrorData> {
    serde_json::from_value(value.clone()).map_err(|_| {
        ErrorData::invalid_params(
            format!("inputResponses.{key} is not an elicitation result (expected {{\"action\": \"accept\" | \"decline\" | \"cancel\", …}})"),
            None,
        )
    })
}
