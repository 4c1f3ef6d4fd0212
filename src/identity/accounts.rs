//! Disabling and enabling an account: one decision for the admin pages and the CLI.
//!
//! A disabled account cannot sign in and its bearer tokens are refused (checked where they
//! are verified); disabling also ends its browser sessions at once, so an open page stops
//! working at the next request. Each change is audited with who made it.

use super::context::IdentityContext;
use crate::store::StoreResult;
use crate::store::audit::{Actor, AuditEvent};
use crate::store::users::{AdminChange, AdminGuard, Guarded};

/// Disables (`disable = true`) or enables `user_id`, audited with `actor` (an admin, or the
/// CLI). Returns how many browser sessions were ended.
pub async fn set_disabled(core: &IdentityContext, user_id: &str, disable: bool, actor: Actor<'_>) -> StoreResult<u64> {
    let now = core.now();
    core.store.users().set_disabled(user_id, disable.then_some(now)).await?;
    let ended = if disable { core.store.browser_sessions().delete_for_user(user_id).await? } else { 0 };
    let action = if disable { "admin.user_disabled" } else { "admin.user_enabled" };
    let detail = format!("sessions_ended={ended}");
    core.store.audit().record(now, AuditEvent::new(actor, action, Some(user_id)).detail(Some(&detail))).await?;
    Ok(ended)
}

/// What [`disable`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disabled {
    /// Disabled; this many browser sessions ended.
    Done(u64),
    /// Nothing changed: the user is the last enabled admin (see [`AdminGuard`]).
    LastAdmin,
    NoSuchUser,
}

/// Disables `user_id`, audited with `actor`, unless `guard` keeps the last enabled admin: the
/// check and the change are one statement, so two admins disabling each other at the same
/// instant cannot both succeed (`Users::disable_or_demote`).
pub async fn disable(
    core: &IdentityContext,
    user_id: &str,
    guard: AdminGuard,
    actor: Actor<'_>,
) -> StoreResult<Disabled> {
    let now = core.now();
    match core.store.users().disable_or_demote(user_id, AdminChange::Disable(now), guard).await? {
        Guarded::Done => {}
        Guarded::LastAdmin => return Ok(Disabled::LastAdmin),
        Guarded::NoSuchUser => return Ok(Disabled::NoSuchUser),
    }
    let ended = core.store.browser_sessions().delete_for_user(user_id).await?;
    let detail = format!("sessions_ended={ended}");
    core.store
        .audit()
        .record(now, AuditEvent::new(actor, "admin.user_disabled", Some(user_id)).detail(Some(&detail)))
        .await?;
    Ok(Disabled::Done(ended))
}
