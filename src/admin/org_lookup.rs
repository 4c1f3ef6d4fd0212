//! Finding an organization the operator names and recording what a command did to it: shared
//! by `admin orgs …` and `admin orgs apps …`.

use anyhow::Context;

use crate::domain::OrgSlug;
use crate::state::AppState;
use crate::store::audit::{Actor, AuditEvent};
use crate::store::organizations::Organization;

pub(super) fn parse_slug(text: &str) -> anyhow::Result<OrgSlug> {
    Ok(OrgSlug::parse(text)?)
}

pub(super) async fn find(state: &AppState, slug: &str) -> anyhow::Result<Organization> {
    let parsed = parse_slug(slug)?;
    state
        .core
        .store
        .organizations()
        .by_slug(&parsed)
        .await?
        .with_context(|| format!("no organization {slug} (see `oauth-broker admin orgs list`)"))
}

pub(super) async fn audit(state: &AppState, action: &str, user: Option<&str>, detail: String) -> anyhow::Result<()> {
    let event = AuditEvent::new(Actor::Cli, action, user).detail(Some(&detail));
    state.core.store.audit().record(state.core.now(), event).await?;
    Ok(())
}

pub(super) fn org_detail(org: &Organization) -> String {
    format!("org={} org_id={}", org.slug, org.id)
}
