//! A registered service ("tool server", `admin services add`) proves who it is: HTTP Basic with
//! the client id and secret `admin services add` printed (RFC 6749 §2.3.1: each
//! form-urlencoded, then joined by ':' and base64 encoded, RFC 7617), at the token API and at
//! the token exchange alike. The secret is compared as a SHA-256 hash in constant time
//! ([`SecretHash::verify`]). A missing or malformed header, an unknown client id and a wrong
//! secret all get the same answer ([`ServiceAuthRefusal::InvalidClient`]), and the secret is
//! never logged. The limits it enforces are [`super::service_limits`]'.

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use secrecy::{ExposeSecret, SecretString};

use super::context::IdentityContext;
use super::service_auth_refusal::ServiceAuthRefusal;
use super::service_limits;
use crate::crypto::SecretHash;
use crate::store::token_api::{CLIENT_ID_PREFIX, ServiceRow};

/// The service whose credentials `headers` carry, with one request taken from its budget;
/// [`ServiceAuthRefusal::InvalidClient`] (counted against `address`), or
/// [`ServiceAuthRefusal::Limited`] when the address is locked for failed authentications or the
/// service's budget is used up; [`ServiceAuthRefusal::Store`] only when the database fails.
pub async fn authenticate(
    identity: &IdentityContext,
    headers: &HeaderMap,
    address: &str,
) -> Result<ServiceRow, ServiceAuthRefusal> {
    // Before the secret is checked: a locked address learns nothing, right or wrong.
    service_limits::check_address(identity, address).await?;
    match check_credentials(identity, headers).await {
        Ok(service) => {
            service_limits::take_request(identity, &service).await?;
            Ok(service)
        }
        Err(refusal) => {
            if matches!(refusal, ServiceAuthRefusal::InvalidClient) {
                service_limits::count_failed_authentication(identity, address).await?;
            }
            Err(refusal)
        }
    }
}

async fn check_credentials(identity: &IdentityContext, headers: &HeaderMap) -> Result<ServiceRow, ServiceAuthRefusal> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let credentials = match (values.next(), values.next()) {
        (Some(value), None) => value.to_str().ok().and_then(parse_basic),
        _ => None,
    };
    let Some((client_id, secret)) = credentials else {
        tracing::info!("service authentication failed: no single valid Basic Authorization header");
        return Err(ServiceAuthRefusal::InvalidClient);
    };
    let row = if looks_like_client_id(&client_id) { identity.store.services().by_id(&client_id).await? } else { None };
    match row {
        Some(row) if row.secret_hash.verify(secret.expose_secret()) => Ok(row),
        Some(row) => {
            tracing::info!(client_id = %row.id, "service authentication failed: wrong secret");
            Err(ServiceAuthRefusal::InvalidClient)
        }
        None => {
            // Hash anyway, so an unknown id costs what a wrong secret does.
            let _ = UNKNOWN_CLIENT_HASH.verify(secret.expose_secret());
            tracing::info!("service authentication failed: unknown client id");
            Err(ServiceAuthRefusal::InvalidClient)
        }
    }
}

/// Compared against when the client id is unknown; matches nothing (no SHA-256 preimage).
static UNKNOWN_CLIENT_HASH: std::sync::LazyLock<SecretHash> =
    std::sync::LazyLock::new(|| SecretHash::of("oauth-broker: no such service"));

/// `svc_` and a name by the provider id rule: anything else is not looked up.
fn looks_like_client_id(client_id: &str) -> bool {
    client_id.strip_prefix(CLIENT_ID_PREFIX).is_some_and(|name| crate::domain::ProviderId::parse(name).is_ok())
}

/// A service's Basic credentials: the OAuth client parser, and a secret is never empty.
pub fn parse_basic(header: &str) -> Option<(String, SecretString)> {
    crate::token_endpoint::presented_client::parse_basic(header)
        .filter(|(_, secret)| !secret.expose_secret().is_empty())
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;

    use super::*;

    fn basic(raw: &str) -> String {
        format!("Basic {}", STANDARD.encode(raw))
    }

    #[test]
    fn basic_credentials_are_form_decoded_after_base64() {
        let (id, secret) = parse_basic(&basic("svc_notes:obs_a%3Ab%25c+d")).unwrap();
        assert_eq!(id, "svc_notes");
        assert_eq!(secret.expose_secret(), "obs_a:b%c d");
        let (_, secret) = parse_basic(&basic("svc_notes:a:b")).unwrap();
        assert_eq!(secret.expose_secret(), "a:b", "only the first colon separates");
        assert!(parse_basic(&format!("basic  {}", STANDARD.encode("svc_n:s"))).is_some(), "scheme is case-insensitive");
        let (id, _) = parse_basic(&basic("svc%5Fnotes:s")).unwrap();
        assert_eq!(id, "svc_notes", "the id is form-decoded too");
    }

    #[test]
    fn malformed_basic_credentials_are_refused() {
        for bad in [
            "Bearer abc".to_owned(),
            "Basic".to_owned(),
            "Basic !!!".to_owned(),
            basic("no-colon"),
            basic(":secret"),
            basic("svc_notes:"),
            basic("svc_notes:%zz"),
            basic("svc_notes:%4"),
            basic("svc_notes:%FF"),
            format!("Basic {}", STANDARD.encode([b's', b':', 0xff])),
        ] {
            assert!(parse_basic(&bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn only_service_client_ids_are_looked_up() {
        assert!(looks_like_client_id("svc_notes"));
        for bad in ["notes", "svc_", "svc_Notes", "client:svc_notes", &format!("svc_{}", "x".repeat(65))] {
            assert!(!looks_like_client_id(bad), "{bad}");
        }
    }
}
