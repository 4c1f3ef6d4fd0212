//! Whom a service acts for, and for which provider: the checks every token-API request makes
//! before the core decides about a token ([`super::service_access`]).
//!
//! A service proves the user with that user's own access token, issued for the service's
//! registered resource (RFC 8693 `subject_token`; RFC 8707 audience): a token the user's MCP
//! client obtained for *this* tool server, so a service can never act for a user who did not
//! come through it. Only a service the operator marked `--trusted` may name a user id instead.

use std::sync::Arc;

use super::core::Core;
use super::service_refusal::ServiceRefusal;
use crate::config::ProviderConfig;
use crate::identity::IdentityContext;
use crate::identity::bearer::{self, Rejection};
use crate::store::token_api::ServiceRow;

/// How the request names the user.
#[derive(Clone, Copy)]
pub enum Subject<'a> {
    /// The user's access token (never logged, never echoed).
    Token(&'a str),
    /// A user id (trusted services only).
    UserId(&'a str),
}

impl<'a> Subject<'a> {
    /// Exactly one of the two.
    pub fn from_parts(token: Option<&'a str>, user_id: Option<&'a str>) -> Result<Self, ServiceRefusal> {
        match (token.filter(|t| !t.is_empty()), user_id.filter(|u| !u.is_empty())) {
            (Some(token), None) => Ok(Subject::Token(token)),
            (None, Some(user_id)) => Ok(Subject::UserId(user_id)),
            (Some(_), Some(_)) => Err(ServiceRefusal::SubjectTwice),
            (None, None) => Err(ServiceRefusal::NoSubject),
        }
    }
}

/// The user id the service may act for: a user its request proves, who is a member of the
/// service's organization. A user of another organization is refused exactly like one who does
/// not exist (or a token that is not for this service), so nothing about them shows.
pub async fn user_for(
    core: &Core,
    identity: &IdentityContext,
    service: &ServiceRow,
    subject: Subject<'_>,
) -> Result<String, ServiceRefusal> {
    let user_id = match subject {
        Subject::Token(token) => {
            let Some(resource) = &service.resource else {
                return Err(ServiceRefusal::NoResource);
            };
            if bearer::is_own_audience(identity, resource.as_str()) {
                tracing::error!(service = %service.id, "token API: the service's resource is the broker's own audience");
                return Err(ServiceRefusal::OwnAudience);
            }
            match bearer::authenticate_for_audience(identity, token, resource.as_str()).await {
                Ok(user) => user.user_id,
                Err(Rejection::Unavailable) => return Err(ServiceRefusal::Failed),
                Err(rejection) => {
                    tracing::info!(service = %service.id, ?rejection, "token API: subject token refused");
                    return Err(ServiceRefusal::InvalidSubjectToken);
                }
            }
        }
        Subject::UserId(user_id) => {
            if !service.trusted {
                return Err(ServiceRefusal::NotTrusted);
            }
            // Membership first: a user of another organization and a user who does not exist
            // then cost the same one read, so not even the time taken tells them apart. (A
            // membership names an existing user; whether another organization's user is
            // disabled is not this service's to know.)
            member_of_service_org(core, service, user_id, ServiceRefusal::UnknownUser).await?;
            let Some(user) = core.store.users().by_id(user_id).await? else {
                return Err(ServiceRefusal::UnknownUser);
            };
            if user.is_disabled() {
                return Err(ServiceRefusal::DisabledUser);
            }
            return Ok(user.id);
        }
    };
    // As for a token that is not for this service.
    member_of_service_org(core, service, &user_id, ServiceRefusal::InvalidSubjectToken).await?;
    Ok(user_id)
}

/// `outsider` unless `user_id` is a member of the service's organization.
async fn member_of_service_org(
    core: &Core,
    service: &ServiceRow,
    user_id: &str,
    outsider: ServiceRefusal,
) -> Result<(), ServiceRefusal> {
    if core.store.in_org(&service.organization).members().role_of(user_id).await?.is_none() {
        tracing::info!(service = %service.id, "token API: the user is not a member of the service's organization");
        return Err(outsider);
    }
    Ok(())
}

/// The provider, if configured and given to this service.
pub fn provider_for(core: &Core, service: &ServiceRow, provider: &str) -> Result<Arc<ProviderConfig>, ServiceRefusal> {
    let provider = core.providers.find(provider).ok_or(ServiceRefusal::UnknownProvider)?;
    if !service.allows(&provider.id) {
        return Err(ServiceRefusal::ProviderNotGiven(provider.id.clone()));
    }
    Ok(provider)
}
