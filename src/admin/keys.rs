//! `admin keys …`: the encryption keys that seal secrets at rest, and the broker's JWT signing
//! keys.
//!
//! Where encryption keys live: the active one in `OAUTH_BROKER_ENCRYPTION_KEY` (or
//! `encryption_key`) if set, else `data_dir/encryption.key`; retired ones in
//! `data_dir/retired-keys/<id>.key` and `retired_encryption_keys`. Every key listed opens; only
//! the active one seals. With keys in files, `rotate` does the whole swap and running servers
//! read the files again on their own ([`crate::keyring`]); with the key in the environment it
//! prints a new key and the steps, since only the operator can change a process's environment.
//! `rewrap` then moves every sealed value to the active key while servers keep serving
//! ([`crate::broker::rewrap`]), `status` shows what each key still seals, and `drop` deletes a
//! retired key file once nothing needs it.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Subcommand;
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

use super::display::iso_time;
use crate::crypto::Sealer;
use crate::identity::jwt::{MAX_TOKEN_LIFETIME_SECONDS, TokenKeys};
use crate::startup::{RETIRED_KEYS_DIR, read_key_file, retired_key_files, write_private_file};
use crate::state::AppState;

#[derive(Subcommand, Debug)]
pub enum KeysCommand {
    /// Which encryption keys are loaded and how many sealed values each still holds; the JWT
    /// signing keys and until when each verifies.
    Status {
        /// Machine-readable output (times as Unix seconds).
        #[arg(long)]
        json: bool,
    },
    /// Make a new encryption key the active one; the current key is kept as a retired key (it
    /// still opens what it sealed). Then run `admin keys rewrap`.
    Rotate,
    /// Seal every stored secret again with the active key, while servers keep running;
    /// resumable (run it again after an interruption) and idempotent.
    Rewrap {
        /// Rows per database query.
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(i64).range(1..=10_000))]
        batch: i64,
    },
    /// Delete a retired key file once no stored value needs it (see `status`).
    Drop {
        /// The key id, as `status` shows it.
        key_id: String,
    },
    /// Make a new JWT signing key; tokens the old one signed keep verifying (and its public key
    /// stays in the JWKS) until they expire.
    RotateSigning,
    /// Last resort for an encryption key lost for good (no backup holds it): give up what it
    /// sealed so the broker starts. Its grants need a new consent, its open authorizations end,
    /// JWT signing keys it sealed are deleted (their tokens stop verifying). Audited.
    Forget {
        /// The key id, as start-up's refusal or `status` names it.
        key_id: String,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
}

pub async fn run_keys(state: &AppState, command: KeysCommand) -> anyhow::Result<()> {
    match command {
        KeysCommand::Status { json } => status(state, json).await,
        KeysCommand::Rotate => rotate(state),
        KeysCommand::Rewrap { batch } => rewrap(state, batch).await,
        KeysCommand::Drop { key_id } => drop_key(state, &key_id).await,
        KeysCommand::RotateSigning => rotate_signing(state).await,
        // Run before the keys are loaded (`super::run`): they would refuse to open this database.
        KeysCommand::Forget { .. } => bail!("`admin keys forget` runs before the keys are loaded"),
    }
}

/// `admin keys forget KEY_ID [--yes]`, on the database alone: start-up and every other command
/// refuse while a value is sealed with a key that is not loaded, which is the case this is for.
pub async fn forget(config: &crate::config::Config, key_id: &str, yes: bool) -> anyhow::Result<()> {
    if key_id.len() != 16 || !key_id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        bail!(
            "{key_id:?} is not a key id: 16 lowercase hex digits, as start-up's refusal or `admin keys status` names it"
        );
    }
    let store = crate::startup::open_store(config, crate::startup::Opening::Existing).await?;
    let result = forget_in(&store, key_id, yes).await;
    store.close().await;
    result
}

async fn forget_in(store: &crate::store::Store, key_id: &str, yes: bool) -> anyhow::Result<()> {
    let sealed: Vec<_> = store.sealed().counts().await?.into_iter().filter(|c| c.key_id == key_id).collect();
    if sealed.is_empty() {
        bail!(
            "no stored value is sealed with key {key_id}; nothing to forget (`oauth-broker admin keys status` lists the keys in use)"
        );
    }
    println!("key {key_id} seals:");
    for count in &sealed {
        println!("  {} {}", count.count, count.column.label());
    }
    println!(
        "Forgetting it gives these up for good: those grants need a new consent (their users connect again), \
         those open authorizations end, signing keys it sealed are deleted (tokens they signed stop verifying; \
         a new key is made at the next start), servers behind the broker with a secret header it sealed are removed, \
         webhooks whose signing secret it sealed are removed, and organizations' OAuth apps whose secret it sealed \
         are removed (the grants they issued need a new consent). Do this only if the key is lost and no backup holds it."
    );
    if !yes && !confirmed()? {
        bail!("not confirmed; nothing was changed (type yes, or pass --yes)");
    }
    let now = crate::clock::Clock::now(&crate::clock::SystemClock);
    let gone = store.sealed().forget(key_id, crate::broker::flow::INTERRUPTED, now).await?;
    let detail = format!(
        "key_id={key_id} grants={} authorizations={} signing_keys={} gateway_servers={} webhooks={} provider_apps={}",
        gone.grants, gone.authorizations, gone.signing_keys, gone.gateway_servers, gone.webhooks, gone.provider_apps
    );
    let event = crate::store::audit::AuditEvent::new(crate::store::audit::Actor::Cli, "key.forgotten", None);
    store.audit().record(now, event.detail(Some(&detail))).await?;
    println!(
        "forgot key {key_id}: {} grant(s) need a new consent, {} authorization(s) ended, {} signing key(s) deleted, \
         {} server(s) behind the broker removed (add them again with their secret), \
         {} webhook(s) removed (set them again with `admin services set-webhook`), \
         {} organization app version(s) removed (set them again with `admin orgs set-app`)",
        gone.grants, gone.authorizations, gone.signing_keys, gone.gateway_servers, gone.webhooks, gone.provider_apps
    );
    Ok(())
}

/// Asks on the terminal; anything but `yes` is a no.
fn confirmed() -> anyhow::Result<bool> {
    use std::io::Write;
    print!("Type yes to forget the key: ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer).context("reading the confirmation from standard input")?;
    Ok(answer.trim() == "yes")
}

/// Each key this command can see, with where it comes from.
struct KnownKey {
    id: String,
    active: bool,
    source: String,
    file: Option<PathBuf>,
}

fn known_keys(state: &AppState) -> anyhow::Result<Vec<KnownKey>> {
    let config = &state.core.config;
    let mut keys = Vec::new();
    let (active, source) = match &config.encryption_key {
        Some(key) => (key.clone(), "OAUTH_BROKER_ENCRYPTION_KEY / encryption_key".to_owned()),
        None => {
            let path = config.data_dir.join("encryption.key");
            (read_key_file(&path)?, path.display().to_string())
        }
    };
    keys.push(KnownKey { id: key_id(&active)?, active: true, source, file: None });
    for (path, key) in retired_key_files(&config.data_dir).map_err(|e| anyhow::anyhow!(e))? {
        keys.push(KnownKey { id: key_id(&key)?, active: false, source: path.display().to_string(), file: Some(path) });
    }
    for (i, key) in config.retired_encryption_keys.iter().enumerate() {
        keys.push(KnownKey {
            id: key_id(key)?,
            active: false,
            source: format!("retired_encryption_keys[{i}]"),
            file: None,
        });
    }
    Ok(keys)
}

fn key_id(encoded: &SecretString) -> anyhow::Result<String> {
    let raw = Sealer::parse_key(encoded)?;
    Ok(Sealer::id_of_key(raw.expose_secret())?)
}

async fn status(state: &AppState, as_json: bool) -> anyhow::Result<()> {
    let keys = known_keys(state)?;
    let counts = state.core.store.sealed().counts().await?;
    let mut ids: Vec<String> = keys.iter().map(|k| k.id.clone()).collect();
    for count in &counts {
        if !ids.contains(&count.key_id) {
            ids.push(count.key_id.clone());
        }
    }
    ids.dedup();
    let signing = state.core.store.signing_keys().all().await?;
    if as_json {
        let keys: Vec<_> = ids
            .iter()
            .map(|id| {
                let known = keys.iter().find(|k| &k.id == id);
                let values: serde_json::Map<String, serde_json::Value> = counts
                    .iter()
                    .filter(|c| &c.key_id == id)
                    .map(|c| (c.column.label().to_owned(), json!(c.count)))
                    .collect();
                let total: i64 = counts.iter().filter(|c| &c.key_id == id).map(|c| c.count).sum();
                json!({
                    "id": id,
                    "state": match known { Some(k) if k.active => "active", Some(_) => "retired", None => "missing" },
                    "source": known.map(|k| k.source.clone()),
                    "values": values,
                    "total": total,
                })
            })
            .collect();
        let signing: Vec<_> = signing
            .iter()
            .map(|k| {
                json!({
                    "kid": k.kid,
                    "state": if k.retired_at.is_none() { "active" } else { "retired" },
                    "created_at": k.created_at,
                    "retired_at": k.retired_at,
                    "verifies_until": k.retired_at.map(|r| r + MAX_TOKEN_LIFETIME_SECONDS),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&json!({"encryption_keys": keys, "signing_keys": signing}))?);
        return Ok(());
    }
    println!("encryption keys (the active one seals; every one listed opens):");
    for id in &ids {
        let known = keys.iter().find(|k| &k.id == id);
        let state_word = match known {
            Some(k) if k.active => "active ",
            Some(_) => "retired",
            None => "MISSING",
        };
        let held: Vec<String> =
            counts.iter().filter(|c| &c.key_id == id).map(|c| format!("{} {}", c.count, c.column.label())).collect();
        let held = if held.is_empty() { "seals nothing".to_owned() } else { held.join(", ") };
        println!("  {id}  {state_word}  {held}  ({})", known.map_or("not loaded", |k| k.source.as_str()));
    }
    println!("signing keys:");
    for key in &signing {
        match key.retired_at {
            None => println!("  {}  active   since {}", key.kid, iso_time(key.created_at)),
            Some(retired) => println!(
                "  {}  retired  {}; its tokens verify until {} at the latest",
                key.kid,
                iso_time(retired),
                iso_time(retired + MAX_TOKEN_LIFETIME_SECONDS)
            ),
        }
    }
    Ok(())
}

fn rotate(state: &AppState) -> anyhow::Result<()> {
    let config = &state.core.config;
    let new = Sealer::generate_key();
    let new_id = key_id(&new)?;
    if let Some(current) = &config.encryption_key {
        // Only the operator can change a process's environment: hand over the key and the steps.
        let current_id = key_id(current)?;
        println!("{}", new.expose_secret());
        eprintln!(
            "The active key comes from OAUTH_BROKER_ENCRYPTION_KEY (or encryption_key), which this command cannot \
             change. The line above is a new key (id {new_id}). On every instance:\n\
             1. add the current key (id {current_id}) to retired_encryption_keys and set OAUTH_BROKER_ENCRYPTION_KEY \
             to the new key (with several instances: first add the new key to retired_encryption_keys everywhere, \
             restart, then swap), and restart;\n\
             2. run `oauth-broker admin keys rewrap`;\n\
             3. once `admin keys status` shows the old key seals nothing, remove it from retired_encryption_keys."
        );
        return Ok(());
    }
    let active_path = config.data_dir.join("encryption.key");
    let current = read_key_file(&active_path)?;
    let current_id = key_id(&current)?;
    let retired_dir = config.data_dir.join(RETIRED_KEYS_DIR);
    create_private_dir(&retired_dir)?;
    let retired_path = retired_dir.join(format!("{current_id}.key"));
    if !retired_path.exists() {
        write_private_file(&retired_path, current.expose_secret().as_bytes())
            .with_context(|| format!("writing {}", retired_path.display()))?;
    }
    // The new key replaces the old in one rename: a reader sees the old file or the new one.
    let staged = config.data_dir.join("encryption.key.new");
    let _ = std::fs::remove_file(&staged);
    write_private_file(&staged, new.expose_secret().as_bytes())
        .with_context(|| format!("writing {}", staged.display()))?;
    std::fs::rename(&staged, &active_path).with_context(|| format!("replacing {}", active_path.display()))?;
    println!("new active encryption key {new_id} in {}", active_path.display());
    println!("the previous key {current_id} is kept in {} and still opens what it sealed", retired_path.display());
    println!(
        "running servers start sealing with the new key within key_reload_interval ({}s); then run \
         `oauth-broker admin keys rewrap` and back up the new key",
        config.key_reload_interval.as_secs_f64()
    );
    Ok(())
}

fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).with_context(|| format!("creating {}", dir.display()))
}

/// How many rewrap passes one command makes before it tells the operator to run it again.
const PASSES: usize = 5;

async fn rewrap(state: &AppState, batch: i64) -> anyhow::Result<()> {
    let active = state.core.sealer.active_key_id();
    let mut moved = 0;
    let mut unreadable = Vec::new();
    for _ in 0..PASSES {
        let report = crate::broker::rewrap::rewrap_all(&state.core, batch).await?;
        moved += report.moved();
        unreadable = report.unreadable;
        if report.skipped == 0 {
            break;
        }
    }
    let left: i64 =
        state.core.store.sealed().counts().await?.iter().filter(|c| c.key_id != active).map(|c| c.count).sum();
    println!("{moved} sealed values moved to the active key {active}");
    for what in &unreadable {
        eprintln!("could not open {what}; left as it is");
    }
    if left > 0 {
        bail!(
            "{left} values are still sealed with other keys (being refreshed right now, sealed by a server that has \
             not read the new key yet, or unreadable as listed above); run `oauth-broker admin keys rewrap` again \
             in a moment"
        );
    }
    println!("every stored value is sealed with {active}; retired keys can be dropped (`admin keys drop ID`)");
    Ok(())
}

async fn drop_key(state: &AppState, id: &str) -> anyhow::Result<()> {
    let keys = known_keys(state)?;
    let matching: Vec<&KnownKey> = keys.iter().filter(|k| k.id == id).collect();
    if matching.is_empty() {
        bail!("no key with id {id}; `oauth-broker admin keys status` lists them");
    }
    if matching.iter().any(|k| k.active) {
        bail!("{id} is the active key; rotate first (`oauth-broker admin keys rotate`)");
    }
    let needed: i64 =
        state.core.store.sealed().counts().await?.iter().filter(|c| c.key_id == id).map(|c| c.count).sum();
    if needed > 0 {
        bail!(
            "key {id} still seals {needed} stored values; run `oauth-broker admin keys rewrap` first (nothing was deleted)"
        );
    }
    for key in matching {
        match &key.file {
            Some(path) => {
                std::fs::remove_file(path).with_context(|| format!("deleting {}", path.display()))?;
                println!("deleted {}", path.display());
            }
            None => println!("remove key {id} from {} yourself", key.source),
        }
    }
    Ok(())
}

async fn rotate_signing(state: &AppState) -> anyhow::Result<()> {
    let now = state.core.now();
    let kid =
        TokenKeys::rotate(&state.core.store, &state.core.sealer, now).await.context("rotating the signing key")?;
    println!("new signing key {kid}");
    println!(
        "tokens signed by the previous key keep verifying, and its public key stays in the JWKS, until they expire \
         (at the latest {}); running servers sign with the new key within key_reload_interval ({}s)",
        iso_time(now + MAX_TOKEN_LIFETIME_SECONDS),
        state.core.config.key_reload_interval.as_secs_f64()
    );
    Ok(())
}
