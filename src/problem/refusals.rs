//! The core's refusals of a service ([`ServiceRefusal`]) and identity's ([`ServiceAuthRefusal`])
//! as problems: each one's code, status and words, the same at the token API and at the token
//! exchange. Details are fixed sentences of ours or name values already validated.

use super::details::{AuthorizationLink, Problem};
use crate::broker::service_refusal::ServiceRefusal;
use crate::identity::service_auth_refusal::ServiceAuthRefusal;

impl From<ServiceRefusal> for Problem {
    fn from(refusal: ServiceRefusal) -> Self {
        match refusal {
            ServiceRefusal::UnknownProvider => Problem::unknown_provider(),
            ServiceRefusal::ProviderNotGiven(provider) => Problem::forbidden(format!(
                "this service was not given the provider {provider}; the operator can add it"
            )),
            ServiceRefusal::ProxyOnly => Problem::forbidden(
                "this service is proxy-only: it calls providers through /v1/proxy and never holds a token",
            ),
            ServiceRefusal::InvalidScope(detail) => Problem::invalid_scope(detail),
            ServiceRefusal::NoSubject => {
                Problem::invalid_request("the user's access token (subject_token) is required")
            }
            ServiceRefusal::SubjectTwice => {
                Problem::invalid_request("send either the user's access token or a user id, not both")
            }
            ServiceRefusal::NoResource => Problem::forbidden(
                "this service has no registered resource, so no user token can be meant for it; \
                 ask the operator to register it with --resource",
            ),
            ServiceRefusal::OwnAudience => Problem::forbidden(
                "this service's registered resource is the broker's own; ask the operator to register the \
                 tool server's own URL",
            ),
            ServiceRefusal::InvalidSubjectToken => Problem::invalid_subject_token(),
            ServiceRefusal::NotTrusted => {
                Problem::forbidden("only a trusted service may name a user; present the user's access token instead")
            }
            ServiceRefusal::UnknownUser => Problem::invalid_request("user_id names no user"),
            ServiceRefusal::DisabledUser => Problem::invalid_request("user_id names a disabled user"),
            ServiceRefusal::AuthorizationRequired(required) => {
                let link = AuthorizationLink {
                    id: required.authorization_id,
                    url: required.url,
                    expires_at: required.expires_at,
                };
                Problem::authorization_required(required.reason, required.missing.as_ref(), &link)
                    .with("provider", required.provider.as_str())
            }
            ServiceRefusal::ProviderUnavailable { retry_after } => Problem::provider_unavailable(retry_after.as_secs()),
            ServiceRefusal::ProviderRefused { provider_name, why, retry_after } => {
                let mut problem = Problem::provider_unavailable(retry_after.as_secs());
                problem.detail = format!("{provider_name} refused to refresh the connection ({why}).");
                problem
            }
            ServiceRefusal::Failed => Problem::server_error(),
            ServiceRefusal::Store(error) => Problem::from(error),
        }
    }
}

impl From<ServiceAuthRefusal> for Problem {
    fn from(refusal: ServiceAuthRefusal) -> Self {
        match refusal {
            ServiceAuthRefusal::InvalidClient => Problem::invalid_client(),
            ServiceAuthRefusal::Limited { retry_after, limit } => Problem::rate_limited(retry_after, limit.as_str()),
            ServiceAuthRefusal::Store(error) => Problem::from(error),
        }
    }
}
