//! `admin grants …`, `admin authorizations …`, `admin audit`. Token values are never printed.

use anyhow::Context;
use clap::Subcommand;
use serde_json::json;

use crate::state::AppState;

#[derive(Subcommand, Debug)]
pub enum GrantsCommand {
    /// List grants (one per user, provider and account).
    List {
        /// Only this user's grants (username).
        #[arg(long)]
        user: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Revoke a user's grants at the provider and delete them.
    Revoke {
        user: String,
        provider: String,
        /// Only this account (as `grants list` shows it); all of the user's accounts there when omitted.
        #[arg(long)]
        account: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum ConsentsCommand {
    /// List which clients each user allowed to use which connection.
    List {
        /// Only this user's consents (username).
        #[arg(long)]
        user: Option<String>,
        #[arg(long, default_value_t = 200)]
        limit: i64,
        #[arg(long)]
        json: bool,
    },
    /// Withdraw a client's consent: it asks the user again before using the connection.
    Revoke {
        user: String,
        /// The client key as `consents list` shows it (e.g. `client:abc`, `token:ci`).
        #[arg(long)]
        client: String,
        /// Only connections at this provider.
        #[arg(long)]
        provider: Option<String>,
        /// Only this account (as `grants list` shows it).
        #[arg(long)]
        account: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum AuthorizationsCommand {
    /// Recent connect attempts.
    List {
        #[arg(long, default_value_t = 50)]
        limit: i64,
        #[arg(long)]
        json: bool,
    },
    /// Delete attempts that expired before now.
    Purge,
}

async fn user_id(state: &AppState, name: &str) -> anyhow::Result<String> {
    Ok(state.store.user_by_username(name).await?.with_context(|| format!("no user named {name}"))?.id)
}

pub async fn run_grants(state: &AppState, command: GrantsCommand) -> anyhow::Result<()> {
    match command {
        GrantsCommand::List { user, json } => {
            let grants = match user {
                Some(name) => state.store.grants_for_user(&user_id(state, &name).await?).await?,
                None => state.store.all_grants().await?,
            };
            if json {
                let rows: Vec<_> = grants
                    .iter()
                    .map(|g| json!({"id": g.id, "user_id": g.user_id, "provider": g.provider, "account": g.account_label, "scopes": g.scopes.to_space_separated(), "status": g.status, "expires_at": g.expires_at, "key_id": g.key_id, "has_refresh_token": g.refresh_token_sealed.is_some(), "updated_at": g.updated_at}))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                println!("{:<38} {:<12} {:<16} {:<20} SCOPES", "USER", "PROVIDER", "STATUS", "ACCOUNT");
                for g in grants {
                    println!(
                        "{:<38} {:<12} {:<16} {:<20} {}",
                        g.user_id,
                        g.provider,
                        g.status,
                        g.account_label.as_deref().unwrap_or("-"),
                        g.scopes.to_space_separated()
                    );
                }
            }
            Ok(())
        }
        GrantsCommand::Revoke { user, provider, account } => {
            let id = user_id(state, &user).await?;
            let provider_config = state.providers.find(&provider).with_context(|| {
                format!("unknown provider {provider} (give admin the same settings as serve, e.g. --config or --demo)")
            })?;
            let removed = match account {
                Some(account) => match state.store.grant_for_account(&id, &provider, &account).await? {
                    Some(grant) => {
                        crate::broker::tokens::disconnect_grant(state, provider_config, &grant).await.map(|d| d.deleted)
                    }
                    None => Ok(false),
                },
                None => crate::broker::tokens::disconnect(state, &id, provider_config).await,
            }
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{}", if removed { "revoked and deleted" } else { "no such grant" });
            Ok(())
        }
    }
}

pub async fn run_consents(state: &AppState, command: ConsentsCommand) -> anyhow::Result<()> {
    match command {
        ConsentsCommand::List { user, limit, json } => {
            let consents = match user {
                Some(name) => {
                    let mut consents = state.store.consents_for_user(&user_id(state, &name).await?).await?;
                    consents.truncate(usize::try_from(limit).unwrap_or(0));
                    consents
                }
                None => state.store.all_consents(limit).await?,
            };
            let grants = state.store.all_grants().await?;
            let grant_of = |id: &str| grants.iter().find(|g| g.id == id);
            if json {
                let rows: Vec<_> = consents
                    .iter()
                    .map(|c| {
                        let grant = grant_of(&c.grant_id);
                        json!({"user_id": c.user_id, "grant_id": c.grant_id, "provider": grant.map(|g| &g.provider), "account": grant.and_then(|g| g.account_label.as_ref()), "client": c.client_key, "client_name": c.client_name, "scopes": c.scopes.to_space_separated(), "covers_current_scopes": grant.is_some_and(|g| c.covers(&g.scopes)), "updated_at": c.updated_at})
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                println!("{:<38} {:<12} {:<20} {:<30} SCOPES", "USER", "PROVIDER", "ACCOUNT", "CLIENT");
                for c in consents {
                    let grant = grant_of(&c.grant_id);
                    println!(
                        "{:<38} {:<12} {:<20} {:<30} {}",
                        c.user_id,
                        grant.map(|g| g.provider.as_str()).unwrap_or("-"),
                        grant.and_then(|g| g.account_label.as_deref()).unwrap_or("-"),
                        c.client_key,
                        c.scopes.to_space_separated()
                    );
                }
            }
            Ok(())
        }
        ConsentsCommand::Revoke { user, client, provider, account } => {
            let id = user_id(state, &user).await?;
            let grants = state.store.grants_for_user(&id).await?;
            let mut removed = 0;
            for consent in state.store.consents_for_user(&id).await?.into_iter().filter(|c| c.client_key == client) {
                let Some(grant) = grants.iter().find(|g| g.id == consent.grant_id) else { continue };
                if provider.as_deref().is_some_and(|p| p != grant.provider)
                    || account.as_deref().is_some_and(|a| a != grant.account_label.as_deref().unwrap_or(""))
                {
                    continue;
                }
                if state.store.revoke_consent(&id, &grant.id, &client).await? {
                    removed += 1;
                    let detail = format!("grant={} client={client} by=admin", grant.id);
                    state
                        .store
                        .audit(state.now(), Some(&id), "consent.revoked", Some(&grant.provider), Some(&detail))
                        .await?;
                }
            }
            println!("withdrew {removed} consent(s)");
            Ok(())
        }
    }
}

pub async fn run_authorizations(state: &AppState, command: AuthorizationsCommand) -> anyhow::Result<()> {
    match command {
        AuthorizationsCommand::List { limit, json } => {
            let rows = state.store.all_authorizations(limit).await?;
            if json {
                let rows: Vec<_> = rows
                    .iter()
                    .map(|r| json!({"id": r.id, "user_id": r.user_id, "provider": r.provider, "scopes": r.scopes.to_space_separated(), "kind": r.kind, "client": r.client_key, "client_name": r.client_name, "status": r.status, "failure": r.failure, "created_at": r.created_at, "expires_at": r.expires_at}))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                println!("{:<44} {:<12} {:<8} {:<11} {:<12} FAILURE", "ID", "PROVIDER", "KIND", "STATUS", "EXPIRES");
                for r in rows {
                    println!(
                        "{:<44} {:<12} {:<8} {:<11} {:<12} {}",
                        r.id,
                        r.provider,
                        r.kind,
                        r.status,
                        r.expires_at,
                        r.failure.as_deref().unwrap_or("")
                    );
                }
            }
            Ok(())
        }
        AuthorizationsCommand::Purge => {
            let removed = state.store.purge_authorizations(state.now()).await?;
            println!("removed {removed} expired authorizations");
            Ok(())
        }
    }
}

pub async fn run_audit(state: &AppState, user: Option<String>, limit: i64, json: bool) -> anyhow::Result<()> {
    let user_id = match user {
        Some(name) => Some(user_id(state, &name).await?),
        None => None,
    };
    let entries = state.store.audit_entries(user_id.as_deref(), limit).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&entries)?);
    } else {
        for e in entries {
            println!(
                "{} {:<28} {:<10} {} {}",
                e.at,
                e.action,
                e.provider.as_deref().unwrap_or("-"),
                e.user_id.as_deref().unwrap_or("-"),
                e.detail.as_deref().unwrap_or("")
            );
        }
    }
    Ok(())
}
