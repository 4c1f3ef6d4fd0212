//! May this registered service have this user's token for this provider and scopes: every check
//! of a token-API request (the provider given to the service, a raw token only for a service
//! that is not proxy-only, the scopes, whom it acts for: [`super::service_acting`]), then the
//! core's access decision ([`super::access`], the same one the MCP tools get). Each answer is
//! audited (`token_api.token` for a token that leaves the broker, `token_api.proxy` for a call
//! the broker makes for the service) and counted; a refusal is a [`ServiceRefusal`].
//!
//! For consent a service is a client like any other: the user allows *that tool server* to use
//! a connection, on the same pages.

use super::access::{self, Access, ConnectReason};
use super::authorizations::{self, Requester};
use super::core::Core;
use super::service_acting::{Subject, provider_for, user_for};
use super::service_refusal::{AuthorizationRequired, RequiredReason, ServiceRefusal};
use super::tokens::AccessToken;
use crate::domain::Scopes;
use crate::identity::IdentityContext;
use crate::store::audit::{Actor, AuditEvent, Outcome};
use crate::store::token_api::ServiceRow;

/// What a service asks for.
#[derive(Clone, Copy)]
pub struct TokenAsk<'a> {
    pub provider: &'a str,
    pub scopes: &'a [String],
    pub account: Option<&'a str>,
}

/// Whether the service will hold the token or the broker uses it on its behalf.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// The token leaves the broker (`/v1/tokens`, token exchange): refused to proxy-only services.
    RawToken,
    /// The broker calls the provider itself (`/v1/proxy`).
    Proxy,
}

/// Every check of a token-API request, then the core's answer: a token, or why not.
pub async fn decide(
    core: &Core,
    identity: &IdentityContext,
    service: &ServiceRow,
    subject: Subject<'_>,
    asked: TokenAsk<'_>,
    purpose: Purpose,
) -> Result<AccessToken, ServiceRefusal> {
    let provider = provider_for(core, service, asked.provider)?;
    let provider = &*provider;
    if purpose == Purpose::RawToken && service.proxy_only {
        return Err(ServiceRefusal::ProxyOnly);
    }
    let required = Scopes::parse(asked.scopes).map_err(|e| ServiceRefusal::InvalidScope(e.to_string()))?;
    crate::providers::scopes::check(provider, &required).map_err(|e| ServiceRefusal::InvalidScope(e.to_string()))?;
    let user_id = user_for(core, identity, service, subject).await?;
    let client = service.client();
    let who = Requester {
        user_id: &user_id,
        client: &client,
        client_name: None,
        mcp_session: None,
        server: None,
        organization: Some(&service.organization),
    };
    let answer = access::access(core, &who, provider, asked.account, &required).await.map_err(|error| {
        tracing::error!(error = %crate::error_chain::Chain(&error), service = %service.id, "token API: access decision failed");
        ServiceRefusal::Failed
    })?;
    let audit = Answered { core, service, user_id: &user_id, provider: provider.id.as_str(), purpose };
    let (reason, missing, row) = match answer {
        Access::Ready(token) => {
            audit.record("issued", Outcome::Success).await?;
            return Ok(*token);
        }
        Access::Unavailable { retry_after } => {
            audit.record("provider_unavailable", Outcome::Failure).await?;
            return Err(ServiceRefusal::ProviderUnavailable { retry_after });
        }
        Access::Refused(why) => {
            tracing::warn!(service = %service.id, provider = %provider.id, %why, "token API: provider refused the refresh");
            audit.record("provider_refused", Outcome::Failure).await?;
            return Err(ServiceRefusal::ProviderRefused {
                provider_name: provider.display_name.clone(),
                why,
                retry_after: access::RETRY_AFTER_UNAVAILABLE,
            });
        }
        Access::Connect { authorization, reason: ConnectReason::NotConnected } => {
            (RequiredReason::NotConnected, None, authorization)
        }
        Access::Connect { authorization, reason: ConnectReason::NeedsReconsent } => {
            (RequiredReason::NeedsReconsent, None, authorization)
        }
        Access::MoreScopes { authorization, missing } => (RequiredReason::MissingScopes, Some(missing), authorization),
        Access::AllowClient { authorization } => (RequiredReason::ConsentRequired, None, authorization),
    };
    audit.record(reason.as_str(), Outcome::Refused).await?;
    Err(ServiceRefusal::AuthorizationRequired(Box::new(AuthorizationRequired {
        reason,
        missing,
        provider: provider.id.clone(),
        url: authorizations::connect_url(core, &row.id),
        authorization_id: row.id,
        expires_at: row.expires_at,
    })))
}

/// One token-API answer, to audit and count.
struct Answered<'a> {
    core: &'a Core,
    service: &'a ServiceRow,
    user_id: &'a str,
    provider: &'a str,
    purpose: Purpose,
}

impl Answered<'_> {
    /// Audits the answer (batched: the request waits only for room on the queue,
    /// `store::token_api::audit_queue`) and counts it in the metrics.
    async fn record(&self, answer: &'static str, outcome: Outcome) -> Result<(), ServiceRefusal> {
        let action = match self.purpose {
            Purpose::RawToken => "token_api.token",
            Purpose::Proxy => "token_api.proxy",
        };
        let detail = format!("answer={answer}");
        let event = AuditEvent::new(Actor::Service(&self.service.id), action, Some(self.user_id))
            .provider(Some(self.provider))
            .detail(Some(&detail))
            .outcome(outcome);
        self.core.store.audit_queue().record(self.core.now(), event).await?;
        crate::telemetry::token_api_answer(answer);
        Ok(())
    }
}
