//! `admin services set-webhook | rotate-webhook-secret | remove-webhook` and `admin webhooks
//! list | resend`. A signing secret is printed once, to standard output, and stored
//! sealed; every change is audited without it.

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::json;

use crate::clock::iso_time;
use crate::events::webhooks::endpoint;
use crate::events::webhooks::signing::WebhookSecret;
use crate::state::AppState;
use crate::store::token_api::ServiceRow;
use crate::store::webhooks::DeliveryStatus;

#[derive(Subcommand, Debug)]
pub enum ServiceWebhookCommand {
    /// Give a tool server a webhook: the broker POSTs its users' connection events there,
    /// signed (Standard Webhooks). Prints the signing secret once; replaces any earlier webhook.
    SetWebhook {
        /// The service's name, as `services list` shows it without `svc_`.
        name: String,
        /// The endpoint: an absolute https URL on a public host.
        #[arg(long)]
        url: String,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Make a new signing secret (printed once); the current one keeps signing beside it for
    /// `[webhooks] secret_overlap` (default 24 h), so the receiver can switch without a gap.
    RotateWebhookSecret {
        /// The service's name.
        name: String,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Stop sending events to the tool server; its undelivered events are dead-lettered.
    RemoveWebhook {
        /// The service's name.
        name: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum WebhooksCommand {
    /// Recent deliveries, newest first.
    List {
        /// Only this service's (name, as `services list` shows it without `svc_`).
        #[arg(long)]
        service: Option<String>,
        /// Only deliveries in this state: pending, delivered or dead.
        #[arg(long)]
        status: Option<String>,
        /// How many (1 to 10000).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(i64).range(1..=10_000))]
        limit: i64,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Send an event again (a dead letter, or one delivered that the receiver lost), with the
    /// same id and a fresh retry window.
    Resend {
        /// The event id (`evt_…`), as `webhooks list` shows it.
        event_id: String,
        /// Only to this service (name).
        #[arg(long)]
        service: Option<String>,
    },
}

async fn service(state: &AppState, name: &str) -> anyhow::Result<ServiceRow> {
    state
        .core
        .store
        .services()
        .by_name(name)
        .await?
        .with_context(|| format!("no service named {name}; see `admin services list`"))
}

fn print_secret(service: &ServiceRow, url: &str, secret: &WebhookSecret, json: bool) -> anyhow::Result<()> {
    if json {
        let out = json!({"client_id": service.id, "url": url, "signing_secret": secret.expose()});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("webhook: {url}");
        println!("signing_secret: {}", secret.expose());
    }
    eprintln!("the signing secret is shown only now; the broker keeps it sealed");
    Ok(())
}

pub async fn run_service_webhook(state: &AppState, command: ServiceWebhookCommand) -> anyhow::Result<()> {
    let now = state.core.now();
    match command {
        ServiceWebhookCommand::SetWebhook { name, url, json } => {
            let service = service(state, &name).await?;
            let url = endpoint::check(&url, &state.core.config.webhooks)?;
            let secret = WebhookSecret::generate();
            if !state
                .core
                .store
                .webhooks()
                .set(&service.id, url.as_str(), &secret.seal(&state.core.sealer, &service.id), now)
                .await?
            {
                bail!("no service named {name}");
            }
            let detail = format!("client_id={} url={url}", service.id);
            state
                .core
                .store
                .audit()
                .record_implied(now, None, "admin.webhook_set", None, Some(&format!("{detail} actor=cli")))
                .await?;
            print_secret(&service, url.as_str(), &secret, json)
        }
        ServiceWebhookCommand::RotateWebhookSecret { name, json } => {
            let service = service(state, &name).await?;
            let webhook =
                state.core.store.webhooks().by_service(&service.id).await?.with_context(|| {
                    format!("service {name} has no webhook; set one with `admin services set-webhook`")
                })?;
            let secret = WebhookSecret::generate();
            let overlap = i64::try_from(state.core.config.webhooks.secret_overlap.as_secs()).unwrap_or(0);
            let sealed = secret.seal(&state.core.sealer, &service.id);
            if !state.core.store.webhooks().rotate_secret(&service.id, &sealed, now + overlap, now).await? {
                bail!("service {name} has no webhook");
            }
            let detail = format!("client_id={} previous_valid_until={} actor=cli", service.id, iso_time(now + overlap));
            state
                .core
                .store
                .audit()
                .record_implied(now, None, "admin.webhook_secret_rotated", None, Some(&detail))
                .await?;
            eprintln!("the previous secret keeps signing until {}", iso_time(now + overlap));
            print_secret(&service, &webhook.url, &secret, json)
        }
        ServiceWebhookCommand::RemoveWebhook { name } => {
            let service = service(state, &name).await?;
            if !state.core.store.webhooks().remove(&service.id, now).await? {
                bail!("service {name} has no webhook");
            }
            let detail = format!("client_id={} actor=cli", service.id);
            state.core.store.audit().record_implied(now, None, "admin.webhook_removed", None, Some(&detail)).await?;
            println!("removed the webhook of service {name}; its undelivered events are dead letters");
            Ok(())
        }
    }
}

pub async fn run_webhooks(state: &AppState, command: WebhooksCommand) -> anyhow::Result<()> {
    match command {
        WebhooksCommand::List { service: name, status, limit, json } => {
            let service_id = match &name {
                Some(name) => Some(service(state, name).await?.id),
                None => None,
            };
            let status = match status.as_deref().map(str::trim) {
                None => None,
                Some(text) => Some(
                    DeliveryStatus::parse(text)
                        .with_context(|| format!("--status must be pending, delivered or dead, got {text:?}"))?,
                ),
            };
            let rows = state.core.store.webhook_events().list(service_id.as_deref(), status, limit).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
                return Ok(());
            }
            println!(
                "{:<37} {:<24} {:<33} {:<10} {:<8} {:<21} LAST_ERROR",
                "EVENT_ID", "SERVICE", "TYPE", "STATUS", "ATTEMPTS", "CREATED"
            );
            for row in rows {
                println!(
                    "{:<37} {:<24} {:<33} {:<10} {:<8} {:<21} {}",
                    row.event_id,
                    row.service_id,
                    row.event_type,
                    row.status.as_str(),
                    row.attempts,
                    iso_time(row.created_at),
                    row.last_error.as_deref().unwrap_or("-"),
                );
            }
            Ok(())
        }
        WebhooksCommand::Resend { event_id, service: name } => {
            let service_id = match &name {
                Some(name) => Some(service(state, name).await?.id),
                None => None,
            };
            let event_id = event_id.trim();
            let now = state.core.now();
            let resent = state.core.store.webhook_events().resend(event_id, service_id.as_deref(), now).await?;
            if resent == 0 {
                bail!(
                    "no delivered or dead event {event_id:?}{}; see `admin webhooks list` (a pending one is still being tried)",
                    name.map(|n| format!(" for service {n}")).unwrap_or_default()
                );
            }
            let detail = format!("event_id={event_id} deliveries={resent} actor=cli");
            state.core.store.audit().record_implied(now, None, "admin.webhook_resent", None, Some(&detail)).await?;
            println!("queued {resent} delivery(ies) of {event_id} again");
            Ok(())
        }
    }
}
