//! The admin pages' actions. Each is a form POST carrying the session's CSRF token, refused
//! (nothing changed) without it, for an unknown id, or for a row in the wrong state; each is
//! audited with the admin in the audit log's `actor` column and answers 303 back to
//! its list with a notice code ([`super::listing::notice_text`]) saying what really happened.

use axum::Form;
use axum::extract::State;
use axum::extract::rejection::FormRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::signed_in_admin::Admin;
use crate::broker::tokens::{self, Revocation};
use crate::html::{self, PageError};
use crate::state::AppState;
use crate::store::audit::{AuditEvent, Outcome};
use crate::store::users::AdminGuard;

/// The form fields every action takes besides its own, and where the form was sent from.
fn checked<T: HasCsrf>(
    state: &AppState,
    admin: &Admin,
    headers: &HeaderMap,
    form: Result<Form<T>, FormRejection>,
) -> Result<T, PageError> {
    if let Some(refusal) = cross_site(state, headers) {
        tracing::warn!(user_id = %admin.0.user.id, why = refusal, "admin action refused: sent from another site");
        return Err(PageError::page(
            StatusCode::FORBIDDEN,
            "Sent from another site",
            format!("This admin form came from another site ({refusal}), so it was not accepted and nothing changed."),
            "Open the admin pages at this broker's own address and use their buttons. If you did, check that \
             public_url is the address your browser shows.",
        ));
    }
    let Ok(Form(form)) = form else { return Err(bad_form()) };
    if !crate::html::csrf::session_token_matches(&admin.0, form.csrf_token()) {
        tracing::warn!(user_id = %admin.0.user.id, "admin action refused: CSRF token missing or wrong");
        return Err(PageError::csrf());
    }
    Ok(form)
}

/// Why a form was sent from another site, if it was: defence in depth beside the CSRF token
/// and the SameSite cookie, as `/mcp` checks `Origin`. A browser that sends `Sec-Fetch-Site`
/// is believed: it must say `same-origin` (or `none`: the user's own action). Otherwise the
/// `Origin` must be the broker's own; `null` (a sandboxed or opaque sender) is refused. Only
/// with `Sec-Fetch-Site: same-origin` is `Origin: null` accepted: our pages' `no-referrer`
/// policy makes a browser send `null` on its own same-origin form posts. A client that sends
/// neither header (not a browser) is judged by the CSRF token alone.
pub fn cross_site(state: &AppState, headers: &HeaderMap) -> Option<&'static str> {
    let text = |name: &str| headers.get(name).map(|v| v.to_str().unwrap_or_default());
    if let Some(site) = text("sec-fetch-site") {
        return (!matches!(site, "same-origin" | "none")).then_some("Sec-Fetch-Site is not same-origin");
    }
    let origin = text("origin")?;
    let own = state.core.config.public_url.origin().ascii_serialization();
    let with_port = state.core.config.public_url.port_or_known_default().map(|port| format!("{own}:{port}"));
    if origin == own || Some(origin) == with_port.as_deref() {
        None
    } else if origin == "null" {
        Some("its Origin is null")
    } else {
        Some("its Origin is not this broker")
    }
}

/// A form the admin pages do not send, with advice for an admin (not the MCP user's "start
/// again from your client").
fn bad_form() -> PageError {
    PageError::page(
        StatusCode::BAD_REQUEST,
        "Not a valid admin request",
        "This form is not one the admin pages send, so nothing changed.",
        "Go back to the admin list, reload it, and use its buttons.",
    )
}

trait HasCsrf {
    fn csrf_token(&self) -> &str;
}

macro_rules! form {
    ($name:ident { $($field:ident),* }) => {
        #[derive(serde::Deserialize)]
        pub struct $name {
            #[serde(default)]
            csrf_token: String,
            $(#[serde(default)] $field: String,)*
        }
        impl HasCsrf for $name {
            fn csrf_token(&self) -> &str {
                &self.csrf_token
            }
        }
    };
}

form!(RevokeGrantForm { grant_id });
form!(WithdrawConsentForm { grant_id, client_key });
form!(ExpireForm { id });
form!(ResendForm { event_id });
form!(DisableForm { user_id, disabled });

fn not_found(what: &str, list: &str) -> PageError {
    PageError::page(
        StatusCode::NOT_FOUND,
        "Not found",
        format!("There is no such {what} (any more), so nothing changed."),
        format!("Go back to {list} and reload it to see what is there now."),
    )
}

/// `POST /admin/grants/revoke`: through [`tokens::disconnect_grant`], as the user's own page.
pub async fn revoke_grant(
    State(state): State<AppState>,
    admin: Admin,
    headers: HeaderMap,
    form: Result<Form<RevokeGrantForm>, FormRejection>,
) -> Result<Response, PageError> {
    let form = checked(&state, &admin, &headers, form)?;
    let Some(grant) = state.core.store.grants().by_id(&form.grant_id).await? else {
        return Err(not_found("grant", "Grants"));
    };
    let Some(provider) = state.core.providers.find(&grant.provider) else {
        return Err(PageError::page(
            StatusCode::CONFLICT,
            "Provider not configured",
            "This grant's provider is no longer configured, so it cannot be revoked there; nothing changed.",
            "Use `oauth-broker admin grants revoke` after configuring the provider again.",
        ));
    };
    let done =
        tokens::disconnect_grant_by(&state.core, &provider, &grant, crate::broker::connection_events::RevokedBy::Admin)
            .await
            .map_err(PageError::internal)?;
    let notice = match done.revocation {
        Revocation::Revoked => "revoked",
        Revocation::NotOffered => "revocation_not_offered",
        Revocation::Failed => "revocation_failed",
        Revocation::TokenUnreadable => "token_unreadable",
    };
    let detail = format!("grant={} revocation={notice}", grant.id);
    let outcome = if done.revocation == Revocation::Failed { Outcome::Failure } else { Outcome::Success };
    let event = AuditEvent::new(admin.actor(), "admin.grant_revoked", Some(&grant.user_id))
        .provider(Some(&grant.provider))
        .detail(Some(&detail))
        .outcome(outcome);
    state.core.store.audit().record(state.core.now(), event).await?;
    tracing::info!(admin = %admin.0.user.id, grant = %grant.id, outcome = notice, "an admin revoked a grant");
    Ok(html::see_other(&format!("/admin/grants?notice={notice}")))
}

/// `POST /admin/consents/withdraw`.
pub async fn withdraw_consent(
    State(state): State<AppState>,
    admin: Admin,
    headers: HeaderMap,
    form: Result<Form<WithdrawConsentForm>, FormRejection>,
) -> Result<Response, PageError> {
    let form = checked(&state, &admin, &headers, form)?;
    let Some(consent) = state.core.store.consents().find(&form.grant_id, &form.client_key).await? else {
        return Err(not_found("consent", "Consents"));
    };
    if !state.core.store.consents().revoke(&consent.user_id, &consent.grant_id, &consent.client_key).await? {
        return Err(not_found("consent", "Consents"));
    }
    let provider = state.core.store.grants().by_id(&consent.grant_id).await?.map(|g| g.provider);
    let detail = format!("grant={} client={}", consent.grant_id, consent.client_key);
    let event = AuditEvent::new(admin.actor(), "admin.consent_withdrawn", Some(&consent.user_id))
        .provider(provider.as_deref())
        .detail(Some(&detail));
    state.core.store.audit().record(state.core.now(), event).await?;
    Ok(html::see_other("/admin/consents?notice=withdrawn"))
}

/// `POST /admin/authorizations/expire`: only an open attempt; a finished one is refused.
pub async fn expire_authorization(
    State(state): State<AppState>,
    admin: Admin,
    headers: HeaderMap,
    form: Result<Form<ExpireForm>, FormRejection>,
) -> Result<Response, PageError> {
    let form = checked(&state, &admin, &headers, form)?;
    let Some(row) = state.core.store.authorizations().by_id(&form.id).await? else {
        return Err(not_found("authorization", "Authorizations"));
    };
    let now = state.core.now();
    if !state.core.store.authorizations().expire(&row.id, now).await? {
        return Err(PageError::page(
            StatusCode::CONFLICT,
            "Not open",
            format!(
                "This authorization is {} already, so there is nothing to expire; nothing changed.",
                super::tables::shown_status(&row, now)
            ),
            "Go back to Authorizations and reload it.",
        ));
    }
    let detail = format!("authorization={}", row.id);
    let event = AuditEvent::new(admin.actor(), "admin.authorization_expired", Some(&row.user_id))
        .provider(Some(&row.provider))
        .detail(Some(&detail));
    state.core.store.audit().record(now, event).await?;
    Ok(html::see_other("/admin/authorizations?notice=expired"))
}

/// `POST /admin/users/disable` with `disabled=true|false`. Disabling ends the user's browser
/// sessions; their bearer tokens fail at the next request. An admin cannot disable themself
/// (the last way back in might be their own).
pub async fn disable_user(
    State(state): State<AppState>,
    admin: Admin,
    headers: HeaderMap,
    form: Result<Form<DisableForm>, FormRejection>,
) -> Result<Response, PageError> {
    let form = checked(&state, &admin, &headers, form)?;
    let disable = match form.disabled.as_str() {
        "true" => true,
        "false" => false,
        _ => return Err(bad_form()),
    };
    let Some(user) = state.core.store.users().by_id(&form.user_id).await? else {
        return Err(not_found("user", "Users"));
    };
    if disable && user.id == admin.0.user.id {
        return Err(PageError::page(
            StatusCode::CONFLICT,
            "Not yourself",
            "You cannot disable your own account from here, so nothing changed.",
            "Ask another admin, or use the CLI.",
        ));
    }
    if disable {
        // The check and the change are one statement: two admins disabling each other at the
        // same instant cannot both succeed.
        use crate::identity::accounts::{self, Disabled};
        match accounts::disable(&state.identity, &user.id, AdminGuard::KeepOne, admin.actor()).await? {
            Disabled::Done(_) => {}
            Disabled::NoSuchUser => return Err(not_found("user", "Users")),
            Disabled::LastAdmin => {
                return Err(PageError::page(
                    StatusCode::CONFLICT,
                    "The last admin",
                    "This is the last enabled admin; with nobody left no one could open these pages, so nothing changed.",
                    "Make another admin first (`oauth-broker admin users set-admin NAME true`).",
                ));
            }
        }
    } else {
        crate::identity::accounts::set_disabled(&state.identity, &user.id, false, admin.actor()).await?;
    }
    Ok(html::see_other(if disable { "/admin/users?notice=disabled" } else { "/admin/users?notice=enabled" }))
}

/// `POST /admin/webhooks/resend`: a delivered or dead event is queued again, with its id.
pub async fn resend_webhook(
    State(state): State<AppState>,
    admin: Admin,
    headers: HeaderMap,
    form: Result<Form<ResendForm>, FormRejection>,
) -> Result<Response, PageError> {
    let form = checked(&state, &admin, &headers, form)?;
    let now = state.core.now();
    let resent = state.core.store.webhook_events().resend(form.event_id.trim(), None, now).await?;
    if resent == 0 {
        return Err(PageError::page(
            StatusCode::CONFLICT,
            "Nothing to send again",
            "This event is not delivered or dead (it may be pending, being tried now), so nothing changed.",
            "Go back to Webhooks and reload it.",
        ));
    }
    let detail = format!("event_id={} deliveries={resent}", form.event_id.trim());
    let event = AuditEvent::new(admin.actor(), "admin.webhook_resent", None).detail(Some(&detail));
    state.core.store.audit().record(now, event).await?;
    Ok(html::see_other("/admin/webhooks?notice=resent"))
}
