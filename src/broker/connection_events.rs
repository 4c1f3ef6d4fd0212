//! What the services with a webhook are told about a connection change: the core decides which
//! event a change is, and what it carries — ids, the account's name, scopes, times, never a token.
//! The store writes it beside the change ([`crate::store::machinery::write`]);
//! `src/events/webhooks` delivers it.

use crate::clock::iso_time;
use crate::domain::Scopes;
use crate::store::authorizations::AuthorizationRow;
use crate::store::grants::{GrantRow, GrantStatus};
use crate::store::webhooks::{EventType, NewEvent};

/// Who ended a connection (`connection.revoked`'s `by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevokedBy {
    /// The user, on `/connections` or with `disconnect_account`.
    User,
    /// An operator (`admin grants revoke`, the admin pages).
    Admin,
    /// The provider told the broker the grant is gone.
    Provider,
}

impl RevokedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            RevokedBy::User => "user",
            RevokedBy::Admin => "admin",
            RevokedBy::Provider => "provider",
        }
    }
}

fn scope_list(scopes: &Scopes) -> Vec<String> {
    scopes.to_space_separated().split_whitespace().map(str::to_owned).collect()
}

fn about(
    event_type: EventType,
    grant_id: &str,
    user_id: &str,
    provider: &str,
    account: Option<&str>,
    scopes: &Scopes,
) -> NewEvent {
    NewEvent::new(event_type, user_id, provider)
        .with("connection_id", grant_id)
        .with("account", account.map(str::to_owned))
        .with("scopes", scope_list(scopes))
}

fn about_grant(event_type: EventType, grant: &GrantRow) -> NewEvent {
    about(event_type, &grant.id, &grant.user_id, &grant.provider, grant.account_label.as_deref(), &grant.scopes)
}

/// A grant stored after a consent: `connection.created` for a new one; for one that was there,
/// `connection.updated` when its scopes or account name changed, else `connection.recovered`
/// when it needed a new consent; nothing when the user merely connected the same again.
pub fn stored(
    before: Option<&GrantRow>,
    grant_id: &str,
    user_id: &str,
    provider: &str,
    account: Option<&str>,
    scopes: &Scopes,
) -> Option<NewEvent> {
    let Some(before) = before.filter(|b| b.id == grant_id) else {
        return Some(about(EventType::ConnectionCreated, grant_id, user_id, provider, account, scopes));
    };
    if before.scopes != *scopes || before.account_label.as_deref() != account {
        return Some(
            about(EventType::ConnectionUpdated, grant_id, user_id, provider, account, scopes)
                .with("previous_scopes", scope_list(&before.scopes))
                .with("previous_account", before.account_label.clone()),
        );
    }
    (before.status == GrantStatus::NeedsReconsent)
        .then(|| about(EventType::ConnectionRecovered, grant_id, user_id, provider, account, scopes))
}

/// A refresh failed transiently: `connection.refresh_failed` for the first failure of an
/// episode (the grant had none before), with the error's kind and when it is tried again.
pub fn refresh_failed(grant: &GrantRow, error: &str, next_retry: i64) -> Option<NewEvent> {
    (grant.refresh_gate.failures == 0).then(|| {
        about_grant(EventType::ConnectionRefreshFailed, grant)
            .with("error", error)
            .with("next_retry_at", iso_time(next_retry))
    })
}

/// A refresh succeeded: `connection.recovered` when earlier ones had failed, `connection.updated`
/// when the provider changed the scopes.
pub fn refreshed(before: &GrantRow, scopes: &Scopes) -> Option<NewEvent> {
    if before.scopes != *scopes {
        let mut after = before.clone();
        after.scopes = scopes.clone();
        return Some(
            about_grant(EventType::ConnectionUpdated, &after).with("previous_scopes", scope_list(&before.scopes)),
        );
    }
    (before.refresh_gate.failures > 0).then(|| about_grant(EventType::ConnectionRecovered, before))
}

/// The grant needs a new consent (`invalid_grant`, an unreadable token).
pub fn needs_reauthorization(grant: &GrantRow, reason: &str) -> NewEvent {
    about_grant(EventType::ConnectionNeedsReauthorization, grant).with("reason", reason)
}

/// The grant was deleted.
pub fn revoked(grant: &GrantRow, by: RevokedBy) -> NewEvent {
    about_grant(EventType::ConnectionRevoked, grant).with("by", by.as_str())
}

/// An authorization a service caused reached `event_type`; `None` for one no service caused.
pub fn authorization(row: &AuthorizationRow, event_type: EventType) -> Option<NewEvent> {
    let service = row.client_key.strip_prefix("service:")?;
    let mut event = NewEvent::new(event_type, &row.user_id, &row.provider)
        .with("authorization_id", row.id.as_str())
        .with("scopes", scope_list(&row.scopes));
    event.service_id = Some(service.to_owned());
    Some(event)
}
