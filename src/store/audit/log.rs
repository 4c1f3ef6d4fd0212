//! An append-only record of security events: who acted ([`Actor`]), on whose behalf
//! (`user_id`, the target user) and at which provider, what happened (`action`), how it ended
//! ([`Outcome`]) and when. Never holds a secret. Text a visitor chose (a username typed at
//! sign-in) goes in only through [`quoted`](crate::store::audit::quoted()).
//!
//! New code records through [`Audit::record`] with an explicit actor.
//! [`Audit::record_implied`] (the older five-argument form, still used across the code) derives
//! the actor and outcome from the action the same way migration 0009 backfilled the rows
//! written before the columns existed.

use crate::clock::Timestamp;
use crate::store::machinery::cache_effect::{CacheEffect, FetchIn};
use crate::store::machinery::error::StoreResult;
use crate::store::machinery::store::Store;

/// The handle on the audit log: `store.audit()`.
#[derive(Debug, Clone, Copy)]
pub struct Audit<'s> {
    pub(in crate::store) store: &'s Store,
}

#[derive(Debug, Clone, sqlx::FromRow, serde::Serialize)]
pub struct AuditEntry {
    pub id: i64,
    pub at: i64,
    pub user_id: Option<String>,
    pub action: String,
    pub provider: Option<String>,
    pub detail: Option<String>,
    /// [`Actor::as_text`]; `None` only where not even the action said who it was.
    pub actor: Option<String>,
    /// [`Outcome::as_str`].
    pub outcome: Option<String>,
}

/// Who caused an audited event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor<'a> {
    /// The signed-in user, for themself (browser pages, consent, their own MCP client).
    User(&'a str),
    /// An admin, by user id, through the admin pages.
    Admin(&'a str),
    /// Whoever ran the `oauth-broker admin` CLI on the server.
    Cli,
    /// An MCP client of the broker's own authorization server, by client id.
    Client(&'a str),
    /// A tool-server service of the token API, by id.
    Service(&'a str),
    /// The OIDC issuer, through a claim it asserted at sign-in.
    Issuer,
    /// The broker on its own (refresh, reuse detection, an exchange that failed).
    Broker,
    /// Someone not signed in (a failed sign-in).
    Visitor,
}

impl Actor<'_> {
    /// As stored: `user:<id>`, `admin:<id>`, `cli`, `client:<id>`, `service:<id>`, `issuer`,
    /// `broker`, `visitor`.
    pub fn as_text(&self) -> String {
        match self {
            Actor::User(id) => format!("user:{id}"),
            Actor::Admin(id) => format!("admin:{id}"),
            Actor::Cli => "cli".into(),
            Actor::Client(id) => format!("client:{id}"),
            Actor::Service(id) => format!("service:{id}"),
            Actor::Issuer => "issuer".into(),
            Actor::Broker => "broker".into(),
            Actor::Visitor => "visitor".into(),
        }
    }
}

/// How an audited event ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It happened as asked.
    Success,
    /// Something went wrong (a provider error, a refresh refused, an attempt that expired).
    Failure,
    /// The broker or the user said no (wrong password, disabled account, a declined consent).
    Refused,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
            Outcome::Refused => "refused",
        }
    }

    /// The outcome an action name implies, for [`Audit::record_implied`] and the 0009 backfill.
    pub fn of_action(action: &str) -> Outcome {
        if action.starts_with("admin.") {
            Outcome::Success
        } else if action.ends_with("refused") || action.ends_with("declined") || action.ends_with("sign_in_failed") {
            Outcome::Refused
        } else if ["failed", "needs_reconsent", "expired", "reuse"].iter().any(|w| action.contains(w)) {
            Outcome::Failure
        } else {
            Outcome::Success
        }
    }
}

/// One event for [`Audit::record`].
#[derive(Debug, Clone, Copy)]
pub struct AuditEvent<'a> {
    pub actor: Actor<'a>,
    pub action: &'a str,
    pub outcome: Outcome,
    /// The user the event is about (whose grant, consent, account).
    pub user_id: Option<&'a str>,
    pub provider: Option<&'a str>,
    /// `key=value` pairs; never a secret.
    pub detail: Option<&'a str>,
}

impl<'a> AuditEvent<'a> {
    /// A successful `action` by `actor` about `user_id`.
    pub fn new(actor: Actor<'a>, action: &'a str, user_id: Option<&'a str>) -> Self {
        AuditEvent { actor, action, outcome: Outcome::of_action(action), user_id, provider: None, detail: None }
    }

    pub fn provider(mut self, provider: Option<&'a str>) -> Self {
        self.provider = provider;
        self
    }

    pub fn detail(mut self, detail: Option<&'a str>) -> Self {
        self.detail = detail;
        self
    }

    pub fn outcome(mut self, outcome: Outcome) -> Self {
        self.outcome = outcome;
        self
    }
}

/// The actor an older [`Audit::record_implied`] call implies: the same rules as migration 0009's
/// backfill. Admin actions (`admin.*`) that still name their actor in `detail` (`actor=cli`,
/// `actor=<user id> (<name>)`) are read from there; no other action's detail is trusted for
/// it (a failed sign-in's detail holds a username a visitor typed).
pub fn implied_actor<'a>(action: &str, user_id: Option<&'a str>, detail: Option<&'a str>) -> Actor<'a> {
    let admin_detail = detail.filter(|_| action.starts_with("admin."));
    if let Some(rest) = admin_detail.and_then(|d| d.strip_prefix("actor=").or_else(|| d.split(" actor=").nth(1))) {
        let id = rest.split(' ').next().unwrap_or_default();
        return match id {
            "cli" => Actor::Cli,
            "issuer" => Actor::Issuer,
            "" => Actor::Broker,
            id => Actor::Admin(id),
        };
    }
    let user = |id: Option<&'a str>| id.map_or(Actor::Broker, Actor::User);
    match action {
        "browser.sign_in_failed" => Actor::Visitor,
        "oauth_client.registered" | "oauth_grant.revoked_by_client" => Actor::Broker,
        "service.added" | "service.removed" | "service.secret_rotated" => Actor::Cli,
        "gateway_server.added" | "gateway_server.removed" => Actor::Cli,
        "user.admin_from_claim" => Actor::Issuer,
        "grant.refreshed" | "grant.needs_reconsent" | "oauth_grant.revoked_on_reuse" | "authorization.failed" => {
            Actor::Broker
        }
        _ => user(user_id),
    }
}

/// Counts an entry in the metrics (`src/telemetry.rs` describes them and serves `/metrics`),
/// here where every entry passes, and the authorization outcomes among them. `action` is one of
/// the broker's own action names (never text from outside).
pub(in crate::store) fn counted(action: &str, outcome: Outcome) {
    let action_label = action.to_owned();
    metrics::counter!("oauth_broker_audit_events_total", "action" => action_label, "outcome" => outcome.as_str())
        .increment(1);
    let authorization = match action {
        "authorization.completed" => "completed",
        "authorization.declined" => "declined",
        "authorization.failed" => "failed",
        "admin.authorization_expired" => "expired",
        _ => return,
    };
    metrics::counter!("oauth_broker_authorizations_total", "outcome" => authorization).increment(1);
}

pub(in crate::store) const AUDIT_COLUMNS: &str = "id, at, user_id, action, provider, detail, actor, outcome";

impl Audit<'_> {
    /// Appends one event (see [`AuditEvent`]).
    pub async fn record(self, at: Timestamp, event: AuditEvent<'_>) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO audit_log (at, user_id, action, provider, detail, actor, outcome) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(at)
        .bind(event.user_id)
        .bind(event.action)
        .bind(event.provider)
        .bind(event.detail)
        .bind(event.actor.as_text())
        .bind(event.outcome.as_str())
        .execute(self.store.write(CacheEffect::Nothing))
        .await?;
        counted(event.action, event.outcome);
        Ok(())
    }

    /// Appends one event whose actor and outcome follow from the action ([`implied_actor`],
    /// [`Outcome::of_action`]). Prefer [`Audit::record`] where the caller knows who acted.
    pub async fn record_implied(
        self,
        at: Timestamp,
        user_id: Option<&str>,
        action: &str,
        provider: Option<&str>,
        detail: Option<&str>,
    ) -> StoreResult<()> {
        let event = AuditEvent {
            actor: implied_actor(action, user_id, detail),
            action,
            outcome: Outcome::of_action(action),
            user_id,
            provider,
            detail,
        };
        self.record(at, event).await
    }

    /// The newest `limit` entries, about one user or all. Two statements, not
    /// `($1 IS NULL OR user_id = $1)`, which kept SQLite from the `audit_log_user` index.
    pub async fn entries(self, user_id: Option<&str>, limit: i64) -> StoreResult<Vec<AuditEntry>> {
        Ok(match user_id {
            Some(user_id) => {
                sqlx::query_as::<_, AuditEntry>(&format!(
                    "SELECT {AUDIT_COLUMNS} FROM audit_log WHERE user_id = $1 ORDER BY id DESC LIMIT $2"
                ))
                .bind(user_id)
                .bind(limit)
                .fetch_all_in(self.store.read())
                .await?
            }
            None => {
                sqlx::query_as::<_, AuditEntry>(&format!(
                    "SELECT {AUDIT_COLUMNS} FROM audit_log ORDER BY id DESC LIMIT $1"
                ))
                .bind(limit)
                .fetch_all_in(self.store.read())
                .await?
            }
        })
    }

    /// The highest id of an entry visible now (0: none).
    pub async fn newest_id(self) -> StoreResult<i64> {
        let (newest,): (Option<i64>,) =
            sqlx::query_as("SELECT MAX(id) FROM audit_log").fetch_one_in(self.store.read()).await?;
        Ok(newest.unwrap_or(0))
    }

    /// Entries after `after_id`, oldest first, at most `limit` (`admin audit --follow` polls
    /// with the last id it printed).
    pub async fn entries_after(self, after_id: i64, user_id: Option<&str>, limit: i64) -> StoreResult<Vec<AuditEntry>> {
        Ok(match user_id {
            Some(user_id) => {
                sqlx::query_as::<_, AuditEntry>(&format!(
                    "SELECT {AUDIT_COLUMNS} FROM audit_log WHERE id > $1 AND user_id = $2 ORDER BY id LIMIT $3"
                ))
                .bind(after_id)
                .bind(user_id)
                .bind(limit)
                .fetch_all_in(self.store.read())
                .await?
            }
            None => {
                sqlx::query_as::<_, AuditEntry>(&format!(
                    "SELECT {AUDIT_COLUMNS} FROM audit_log WHERE id > $1 ORDER BY id LIMIT $2"
                ))
                .bind(after_id)
                .bind(limit)
                .fetch_all_in(self.store.read())
                .await?
            }
        })
    }

    /// The newest failures and refusals (the dashboard's "recent failures").
    pub async fn failures(self, limit: i64) -> StoreResult<Vec<AuditEntry>> {
        Ok(sqlx::query_as::<_, AuditEntry>(&format!(
            "SELECT {AUDIT_COLUMNS} FROM audit_log WHERE outcome <> 'success' ORDER BY id DESC LIMIT $1"
        ))
        .bind(limit)
        .fetch_all_in(self.store.read())
        .await?)
    }

    /// The newest entries by one actor (`service:<id>`, …), newest first: the `audit_log_actor`
    /// index (migration 0028) serves it at any size.
    pub async fn by_actor(self, actor: &str, limit: i64) -> StoreResult<Vec<AuditEntry>> {
        Ok(sqlx::query_as::<_, AuditEntry>(&format!(
            "SELECT {AUDIT_COLUMNS} FROM audit_log WHERE actor = $1 ORDER BY id DESC LIMIT $2"
        ))
        .bind(actor)
        .bind(limit)
        .fetch_all_in(self.store.read())
        .await?)
    }
}

impl Audit<'_> {
    /// The newest refreshes and failures about (user, provider): what the grants list shows
    /// as a grant's last refresh and last error.
    pub async fn refreshes_and_failures(
        self,
        user_id: &str,
        provider: &str,
        limit: i64,
    ) -> StoreResult<Vec<AuditEntry>> {
        Ok(sqlx::query_as::<_, AuditEntry>(&format!(
            "SELECT {AUDIT_COLUMNS} FROM audit_log WHERE user_id = $1 AND provider = $2 AND (action IN ('grant.refreshed', 'grant.needs_reconsent') OR outcome <> 'success') ORDER BY id DESC LIMIT $3"
        ))
        .bind(user_id)
        .bind(provider)
        .bind(limit).fetch_all_in(self.store.read())
        .await?)
    }
}
