//! `admin grants …`, `admin authorizations …`, `admin audit`. Token values are never printed.

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::json;

use super::display::{BATCH, StreamJson, StreamTable, UserNames, emit, iso_time, printable, table};
use crate::broker::connection_status::Status;
use crate::domain::Scopes;
use crate::state::AppState;
use crate::store::audit::{Actor, AuditEvent, Outcome};
use crate::store::grants::ConsentRow;
use crate::store::grants::GrantRow;
use crate::store::paging::{Search, Window};

#[derive(Subcommand, Debug)]
pub enum GrantsCommand {
    /// List grants (one per user, provider and account).
    List {
        /// Only this user's grants (username).
        #[arg(long)]
        user: Option<String>,
        /// Machine-readable output (times as Unix seconds, users by id and name).
        #[arg(long)]
        json: bool,
    },
    /// Revoke a user's grants at the provider and delete them.
    Revoke {
        /// The user (username).
        user: String,
        /// The provider id, as `grants list` shows it (e.g. `github`, `demo`).
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
        /// How many consents, most recently changed first.
        #[arg(long, default_value_t = 200)]
        limit: i64,
        /// Machine-readable output (times as Unix seconds, users by id and name).
        #[arg(long)]
        json: bool,
    },
    /// Withdraw a client's consent: it asks the user again before using the connection.
    Revoke {
        /// The user (username).
        user: String,
        /// The client exactly as `consents list` shows it in CLIENT (e.g. `token:demo_client`,
        /// `client:abc`); when nothing matches, the command fails and lists the user's clients.
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
        /// How many attempts, newest first.
        #[arg(long, default_value_t = 50)]
        limit: i64,
        /// Machine-readable output (times as Unix seconds, users by id and name).
        #[arg(long)]
        json: bool,
    },
    /// Delete attempts that expired before now.
    Purge,
}

pub(super) async fn user_id(state: &AppState, name: &str) -> anyhow::Result<String> {
    Ok(state.core.store.users().by_username(name).await?.with_context(|| format!("no user named {name}"))?.id)
}

pub async fn run_grants(state: &AppState, command: GrantsCommand) -> anyhow::Result<()> {
    match command {
        GrantsCommand::List { user, json } => {
            // A batch at a time, newest first, naming only the users each batch shows: the
            // first lines come at once however many grants there are.
            let user_id = match user {
                Some(name) => Some(user_id(state, &name).await?),
                None => None,
            };
            let mut table = StreamTable::new(&["USER", "PROVIDER", "ACCOUNT", "STATUS", "EXPIRES", "SCOPES"]);
            let mut array = StreamJson::default();
            let mut window = Some(Window::first(BATCH));
            while let Some(this) = window.take() {
                let grants = match &user_id {
                    Some(id) => state.core.store.grants().for_user(id).await?,
                    None => {
                        let page = state.core.store.grants().page(&Search::new(""), this).await?;
                        window = page.next.map(|next| Window::after(BATCH, next));
                        page.rows
                    }
                };
                let names = UserNames::of_ids(&state.core.store, grants.iter().map(|g| g.user_id.as_str())).await?;
                let now = state.core.now();
                if json {
                    let rows: Vec<_> = grants
                        .iter()
                        .map(|g| {
                            // The core's status, beside the stored one.
                            let state = Status::of(Some(g), now, &Scopes::default(), None);
                            json!({"id": g.id, "user_id": g.user_id, "user": names.of(&g.user_id), "provider": g.provider, "account": g.account_label, "scopes": g.scopes.to_space_separated(), "status": g.status, "state": state.code(), "last_refresh_error": state.last_error().map(|e| e.as_str()), "next_refresh_at": state.retry_at(), "expires_at": g.expires_at, "key_id": g.key_id, "has_refresh_token": g.refresh_token_sealed.is_some(), "updated_at": g.updated_at})
                        })
                        .collect();
                    emit(&array.batch(&rows))?;
                } else {
                    let rows: Vec<_> = grants
                        .iter()
                        .map(|g| {
                            vec![
                                names.of(&g.user_id).to_owned(),
                                g.provider.clone(),
                                account_of(Some(g)),
                                Status::of(Some(g), now, &Scopes::default(), None).code().to_owned(),
                                g.expires_at.map_or("-".to_owned(), iso_time),
                                g.scopes.to_space_separated(),
                            ]
                        })
                        .collect();
                    emit(&table.batch(&rows))?;
                }
            }
            if json {
                emit(&array.end())?;
            }
            Ok(())
        }
        GrantsCommand::Revoke { user, provider, account } => {
            let id = user_id(state, &user).await?;
            let provider_config = state.core.providers.find(&provider).with_context(|| {
                format!("unknown provider {provider} (give admin the same settings as serve, e.g. --config or --demo)")
            })?;
            let grants = match &account {
                Some(account) => {
                    state.core.store.grants().for_account(&id, &provider, account, None).await?.into_iter().collect()
                }
                None => state.core.store.grants().at(&id, &provider).await?,
            };
            if grants.is_empty() {
                let held = state.core.store.grants().for_user(&id).await?;
                let matching: Vec<String> = held
                    .iter()
                    .filter(|g| g.provider == provider)
                    .map(|g| format!("  {provider}  account {}", account_of(Some(g))))
                    .collect();
                let hint = if matching.is_empty() {
                    format!("{user} has no grant at {provider}")
                } else {
                    format!("{user}'s grants at {provider}:\n{}", matching.join("\n"))
                };
                anyhow::bail!("no grant matched; nothing was revoked. {hint}");
            }
            for grant in &grants {
                let outcome = crate::broker::tokens::disconnect_grant_by(
                    &state.core,
                    &provider_config,
                    grant,
                    crate::broker::connection_events::RevokedBy::Admin,
                )
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
                let detail = format!("grant={} revocation={}", grant.id, revocation_code(outcome.revocation));
                let failed = outcome.revocation == crate::broker::tokens::Revocation::Failed;
                let event = AuditEvent::new(Actor::Cli, "admin.grant_revoked", Some(&grant.user_id))
                    .provider(Some(&grant.provider))
                    .detail(Some(&detail))
                    .outcome(if failed { Outcome::Failure } else { Outcome::Success });
                state.core.store.audit().record(state.core.now(), event).await?;
                println!("{}: {}", account_of(Some(grant)), revocation_said(outcome));
            }
            Ok(())
        }
    }
}

pub async fn run_consents(state: &AppState, command: ConsentsCommand) -> anyhow::Result<()> {
    match command {
        ConsentsCommand::List { user, limit, json } => {
            let consents = match user {
                Some(name) => {
                    let mut consents = state.core.store.consents().for_user(&user_id(state, &name).await?).await?;
                    consents.truncate(usize::try_from(limit).unwrap_or(0));
                    consents
                }
                None => state.core.store.consents().all(limit).await?,
            };
            // Only the grants and users these consents name.
            let mut grant_ids: Vec<&str> = consents.iter().map(|c| c.grant_id.as_str()).collect();
            grant_ids.sort_unstable();
            grant_ids.dedup();
            let mut grants = Vec::new();
            for chunk in grant_ids.chunks(BATCH) {
                grants.extend(state.core.store.grants().by_ids(chunk).await?);
            }
            let grant_of = |id: &str| grants.iter().find(|g| g.id == id);
            let names = UserNames::of_ids(&state.core.store, consents.iter().map(|c| c.user_id.as_str())).await?;
            if json {
                let rows: Vec<_> = consents
                    .iter()
                    .map(|c| {
                        let grant = grant_of(&c.grant_id);
                        json!({"user_id": c.user_id, "user": names.of(&c.user_id), "grant_id": c.grant_id, "provider": grant.map(|g| &g.provider), "account": grant.and_then(|g| g.account_label.as_ref()), "client": c.client_key, "client_name": c.client_name, "scopes": c.scopes.to_space_separated(), "covers_current_scopes": grant.is_some_and(|g| c.covers(&g.scopes)), "updated_at": c.updated_at})
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                let rows: Vec<_> = consents
                    .iter()
                    .map(|c| {
                        let grant = grant_of(&c.grant_id);
                        vec![
                            names.of(&c.user_id).to_owned(),
                            grant.map_or("-".to_owned(), |g| g.provider.clone()),
                            account_of(grant),
                            printable(&c.client_key),
                            iso_time(c.updated_at),
                            c.scopes.to_space_separated(),
                        ]
                    })
                    .collect();
                print!("{}", table(&["USER", "PROVIDER", "ACCOUNT", "CLIENT", "UPDATED", "SCOPES"], &rows));
            }
            Ok(())
        }
        ConsentsCommand::Revoke { user, client, provider, account } => {
            let id = user_id(state, &user).await?;
            let grants = state.core.store.grants().for_user(&id).await?;
            let consents = state.core.store.consents().for_user(&id).await?;
            let grant_of = |consent: &ConsentRow| grants.iter().find(|g| g.id == consent.grant_id);
            let matching: Vec<(&ConsentRow, &GrantRow)> = consents
                .iter()
                .filter(|c| c.client_key == client)
                .filter_map(|c| Some((c, grant_of(c)?)))
                .filter(|(_, g)| {
                    provider.as_deref().is_none_or(|p| p == g.provider)
                        && account.as_deref().is_none_or(|a| a == g.account_label.as_deref().unwrap_or(""))
                })
                .collect();
            if matching.is_empty() {
                bail!(
                    "{}",
                    nothing_matches(&user, &client, provider.as_deref(), account.as_deref(), &consents, &grants)
                );
            }
            let mut removed = 0;
            for (_, grant) in matching {
                if state.core.store.consents().revoke(&id, &grant.id, &client).await? {
                    removed += 1;
                    let detail = format!("grant={} client={client}", grant.id);
                    let event = AuditEvent::new(Actor::Cli, "consent.revoked", Some(&id))
                        .provider(Some(&grant.provider))
                        .detail(Some(&detail));
                    state.core.store.audit().record(state.core.now(), event).await?;
                }
            }
            println!("withdrew {removed} consent(s)");
            Ok(())
        }
    }
}

/// Why `consents revoke` withdrew nothing, and what the user's consents are, so the operator
/// can copy the client exactly.
fn nothing_matches(
    user: &str,
    client: &str,
    provider: Option<&str>,
    account: Option<&str>,
    consents: &[ConsentRow],
    grants: &[GrantRow],
) -> String {
    let mut asked = format!("--client {}", printable(client));
    if let Some(provider) = provider {
        asked.push_str(&format!(" --provider {}", printable(provider)));
    }
    if let Some(account) = account {
        asked.push_str(&format!(" --account {}", printable(account)));
    }
    if consents.is_empty() {
        return format!("{user} has no consents, so nothing matches {asked}; nothing was withdrawn");
    }
    let mut held: Vec<String> = consents
        .iter()
        .map(|c| {
            let grant = grants.iter().find(|g| g.id == c.grant_id);
            let at = grant.map_or("-".to_owned(), |g| g.provider.clone());
            format!("  {}  ({at}, account {})", printable(&c.client_key), account_of(grant))
        })
        .collect();
    held.dedup();
    format!(
        "no consent of {user} matches {asked}; nothing was withdrawn. {user}'s consents (give --client exactly as shown):\n{}",
        held.join("\n")
    )
}

/// A grant's account label as shown to an operator.
fn account_of(grant: Option<&GrantRow>) -> String {
    grant.and_then(|g| g.account_label.as_deref()).map_or("-".to_owned(), printable)
}

pub async fn run_authorizations(state: &AppState, command: AuthorizationsCommand) -> anyhow::Result<()> {
    match command {
        AuthorizationsCommand::List { limit, json } => {
            let now = state.core.now();
            let rows = state.core.store.authorizations().all(limit).await?;
            let names = UserNames::of_ids(&state.core.store, rows.iter().map(|r| r.user_id.as_str())).await?;
            // Named by what the broker knows (the client key: client id, token label,
            // service); the name a client reports for itself only beside it, marked.
            let known =
                crate::broker::consent::client_names(&state.core, rows.iter().map(|r| r.client_key.as_str())).await;
            if json {
                let rows: Vec<_> = rows
                    .iter()
                    .map(|r| json!({"id": r.id, "user_id": r.user_id, "user": names.of(&r.user_id), "provider": r.provider, "scopes": r.scopes.to_space_separated(), "kind": r.kind, "client": r.client_key, "client_known_as": known[&r.client_key].to_string(), "client_name": r.client_name, "status": r.shown_status(now), "failure": r.failure, "created_at": r.created_at, "expires_at": r.expires_at}))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                let rows: Vec<_> = rows
                    .iter()
                    .map(|r| {
                        vec![
                            r.id.clone(),
                            names.of(&r.user_id).to_owned(),
                            r.provider.clone(),
                            r.kind.to_string(),
                            if r.client_key.is_empty() { "-".to_owned() } else { printable(&r.client_key) },
                            r.client_name
                                .as_deref()
                                .map_or("-".to_owned(), |n| format!("\"{}\" (unchecked)", printable(n))),
                            r.shown_status(now).to_owned(),
                            iso_time(r.created_at),
                            iso_time(r.expires_at),
                            r.failure.as_deref().map_or(String::new(), printable),
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    table(
                        &[
                            "ID",
                            "USER",
                            "PROVIDER",
                            "KIND",
                            "CLIENT",
                            "CALLS ITSELF",
                            "STATUS",
                            "CREATED",
                            "EXPIRES",
                            "FAILURE"
                        ],
                        &rows
                    )
                );
            }
            Ok(())
        }
        AuthorizationsCommand::Purge => {
            let removed = state.core.store.authorizations().purge(state.core.now()).await?;
            println!("removed {removed} expired authorizations");
            Ok(())
        }
    }
}

/// The revocation's outcome as the audit log's `detail` words it (as the admin pages do).
fn revocation_code(revocation: crate::broker::tokens::Revocation) -> &'static str {
    use crate::broker::tokens::Revocation;
    match revocation {
        Revocation::Revoked => "revoked",
        Revocation::NotOffered => "revocation_not_offered",
        Revocation::Failed => "revocation_failed",
        Revocation::TokenUnreadable => "token_unreadable",
    }
}

/// What `grants revoke` says about one grant: the provider's answer as it was, never a
/// revocation that did not happen.
fn revocation_said(outcome: crate::broker::tokens::Disconnected) -> &'static str {
    use crate::broker::tokens::Revocation;
    match (outcome.deleted, outcome.revocation) {
        (false, _) => "already gone (deleted meanwhile)",
        (true, Revocation::Revoked) => "revoked at the provider and deleted",
        (true, Revocation::NotOffered) => "deleted; the provider offers no revocation, its tokens lapse on their own",
        (true, Revocation::Failed) => {
            "deleted here, but the provider did not confirm the revocation (revoke it there too)"
        }
        (true, Revocation::TokenUnreadable) => {
            "deleted; its stored token could not be opened, so nothing was sent to the provider"
        }
    }
}
