//! `admin demo …`: the demo provider's registered clients besides the broker's own, so a
//! newcomer can give each organization its own demo-provider app (`admin orgs apps set ORG demo`).

use anyhow::bail;
use clap::Subcommand;
use serde_json::json;

use super::display::{emit, iso_time};
use crate::state::AppState;
use crate::store::StoreError;
use crate::store::audit::{Actor, AuditEvent};

#[derive(Subcommand, Debug)]
pub enum DemoCommand {
    /// Register a client with the demo provider: prints its client id and secret (the secret
    /// once; the provider keeps only its hash).
    AddClient {
        /// What the demo provider's authorize page calls the client ("Acme's notes app").
        name: String,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// The clients registered with the demo provider (never a secret).
    Clients {
        /// Machine-readable output (times as Unix seconds).
        #[arg(long)]
        json: bool,
    },
}

pub async fn run_demo(state: &AppState, command: DemoCommand) -> anyhow::Result<()> {
    let demo = state.core.store.demo();
    match command {
        DemoCommand::AddClient { name, json } => {
            let name = name.trim();
            if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
                bail!("a client name is 1-100 characters without control characters");
            }
            let client_id = format!("demo_client_{}", &uuid::Uuid::new_v4().simple().to_string()[..16]);
            let secret = crate::crypto::random_token(32);
            match demo.add_client(&client_id, name, &crate::crypto::sha256_hex(&secret), state.core.now()).await {
                Ok(()) => {}
                Err(StoreError::Conflict) => bail!("that client id was just taken; run this again"),
                Err(e) => return Err(e.into()),
            }
            let event = AuditEvent::new(Actor::Cli, "demo.client_added", None);
            state
                .core
                .store
                .audit()
                .record(state.core.now(), event.detail(Some(&format!("client_id={client_id}"))))
                .await?;
            if json {
                let shown = json!({"client_id": client_id, "client_secret": secret, "name": name});
                return emit(&format!("{}\n", serde_json::to_string_pretty(&shown)?));
            }
            // Printed on purpose: this is the operator's own terminal, and the secret exists
            // nowhere else.
            emit(&format!(
                "client_id:     {client_id}\nclient_secret: {secret}   (shown once)\n\
                 Give it to an organization: printf '%s' \"$SECRET\" | oauth-broker admin orgs apps set ORG demo --client-id {client_id} --client-secret-stdin\n"
            ))
        }
        DemoCommand::Clients { json } => {
            let clients = demo.clients().await?;
            if json {
                let list: Vec<_> = clients
                    .iter()
                    .map(|c| json!({"client_id": c.client_id, "name": c.name, "created_at": c.created_at}))
                    .collect();
                return emit(&format!("{}\n", serde_json::to_string_pretty(&list)?));
            }
            let mut out = format!("{:<28} {:<21} NAME\n", "CLIENT ID", "REGISTERED");
            for c in &clients {
                out.push_str(&format!("{:<28} {:<21} {}\n", c.client_id, iso_time(c.created_at), c.name));
            }
            emit(&out)
        }
    }
}
