//! Opening the broker's data without ever stranding it.
//!
//! Two rules, learnt the hard way:
//! - **Only `serve` and `migrate` create** a database or a key ([`Opening::Create`]). Every
//!   other command ([`Opening::Existing`]) refuses clearly when there is no database, so a typo
//!   in `--data-dir` cannot leave an empty database and a fresh key behind and exit 0.
//! - **A key is generated only for a database that holds nothing sealed.** If the key file is
//!   gone while the database holds sealed values, a new key would open none of them and would
//!   sit exactly where the restored backup must go; instead the error says which key (its id)
//!   is expected and where it was looked for. A key that is present but is not the one the
//!   database was sealed with is refused the same way, before anything is written.
//!
//! Errors name the source the key really came from: the file, or the setting.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use secrecy::{ExposeSecret, SecretString};

use crate::config::Config;
use crate::config::redact_database_url;
use crate::crypto::Sealer;
use crate::store::Store;
use crate::store::sealing::SealedColumn;

/// Whether a command may create what is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// `serve`, `migrate`: create the database, the schema and the first key.
    Create,
    /// Every other command: the database must exist and hold the schema.
    Existing,
}

/// Where the active sealing key comes from, for messages.
enum KeySource {
    Setting,
    File(PathBuf),
}

impl std::fmt::Display for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySource::Setting => {
                f.write_str("the encryption key from OAUTH_BROKER_ENCRYPTION_KEY (or `encryption_key`)")
            }
            KeySource::File(path) => write!(f, "the encryption key in {}", path.display()),
        }
    }
}

/// Connects and brings the schema up to date; with [`Opening::Existing`], only a database that
/// already exists and holds the broker's schema.
pub async fn open_store(config: &Config, opening: Opening) -> anyhow::Result<Store> {
    let shown = redact_database_url(&config.database_url);
    if opening == Opening::Existing
        && let Some(path) = crate::store::sqlite_path(&config.database_url)
        && !path.exists()
    {
        bail!(
            "there is no database at {} — run `oauth-broker migrate` (or `serve`) first, or check --data-dir / --database-url",
            path.display()
        );
    }
    let store = connect(config).await?;
    if opening == Opening::Existing && store.signing_keys().all().await.is_err() {
        store.close().await;
        bail!(
            "the database {shown} holds no oauth-broker schema — run `oauth-broker migrate` first, or check --database-url"
        );
    }
    store.migrate().await.context("migrating the database")?;
    Ok(store)
}

/// Connects to the configured database; a PostgreSQL that cannot be reached is named by host
/// and port with what the connect said ([`why_unreachable`]).
pub async fn connect(config: &Config) -> anyhow::Result<Store> {
    let shown = redact_database_url(&config.database_url);
    let timeouts = crate::store::DatabaseTimeouts { query: config.database_timeout };
    match Store::connect_with(&config.database_url, timeouts).await {
        Ok(store) => Ok(store),
        Err(error) => match why_unreachable(&config.database_url, config.database_timeout).await {
            Some(unreachable) => {
                bail!("{unreachable} ({shown}): is PostgreSQL running there, and is --database-url right?")
            }
            None => Err(anyhow::Error::new(error).context(format!("connecting to the database ({shown})"))),
        },
    }
}

/// After a failed connect to PostgreSQL: what a plain TCP connect to its host and port says,
/// in words ("connection refused at db.internal:5432"), since the pool itself only reports that
/// it timed out waiting. `None` when the server's port answers (the failure was something
/// else: a password, a database name, TLS) or the URL names no TCP address (a Unix socket).
async fn why_unreachable(database_url: &str, wait: std::time::Duration) -> Option<String> {
    let url = url::Url::parse(database_url).ok()?;
    if !matches!(url.scheme(), "postgres" | "postgresql") || url.query_pairs().any(|(k, _)| k == "host") {
        return None;
    }
    let host = url.host_str().filter(|h| !h.is_empty())?.trim_start_matches('[').trim_end_matches(']').to_owned();
    let port = url.port().unwrap_or(5432);
    let at = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    match tokio::time::timeout(wait, tokio::net::TcpStream::connect((host.as_str(), port))).await {
        Ok(Ok(_)) => None,
        Ok(Err(error)) => Some(match error.kind() {
            std::io::ErrorKind::ConnectionRefused => format!("cannot reach the database: connection refused at {at}"),
            std::io::ErrorKind::HostUnreachable | std::io::ErrorKind::NetworkUnreachable => {
                format!("cannot reach the database: no route to {at}")
            }
            _ if error.to_string().contains("lookup") || error.to_string().contains("resolve") => {
                format!("cannot reach the database: the host name {host} does not resolve")
            }
            _ => format!("cannot reach the database at {at}: {error}"),
        }),
        Err(_) => {
            Some(format!("cannot reach the database: no answer from {at} within {}", humantime::format_duration(wait)))
        }
    }
}

/// The sealing key: from the setting, else `data_dir/encryption.key` (created only by
/// [`Opening::Create`] and only for a database that holds nothing sealed), checked against the
/// key the database's values were sealed with.
pub async fn load_sealer(config: &Config, store: &Store, opening: Opening) -> anyhow::Result<Sealer> {
    let expected = sealed_with(store).await?;
    let path = config.data_dir.join("encryption.key");
    let (encoded, source) = match &config.encryption_key {
        Some(key) => (key.clone(), KeySource::Setting),
        None if path.exists() => (read_key_file(&path)?, KeySource::File(path.clone())),
        None => match (&expected, opening) {
            (Some(kid), _) => bail!(
                "no encryption key: {} does not exist and OAUTH_BROKER_ENCRYPTION_KEY is not set, but this database \
                 holds values sealed with key {kid}. Restore that key from your backup to {}, or set \
                 OAUTH_BROKER_ENCRYPTION_KEY. No new key was made: it could not open them. Only if the key is lost \
                 for good: `oauth-broker admin keys forget {kid}` gives up what it sealed.",
                path.display(),
                path.display()
            ),
            (None, Opening::Existing) => bail!(
                "no encryption key at {} and OAUTH_BROKER_ENCRYPTION_KEY is not set — run `oauth-broker migrate` (or `serve`) first, or check --data-dir",
                path.display()
            ),
            (None, Opening::Create) => (create_key_file(config, &path)?, KeySource::File(path.clone())),
        },
    };
    // Checked here for a message naming the source; the loader reads the same places again.
    Sealer::parse_key(&encoded).map_err(|e| anyhow::anyhow!("{source} is not usable: {e}"))?;
    let loader = key_loader(config, encoded);
    loader().map_err(|e| anyhow::anyhow!(e))?;
    let sealer = Sealer::with_loader(loader).map_err(|e| anyhow::anyhow!(e))?;
    // Which keys seal values, from the key-id indexes (not a read of every value, which took
    // seconds at a million grants); counted only for a key that is missing, for the message.
    let present = store.sealed().key_ids().await.context("listing the keys the database's values are sealed with")?;
    // After a rotation, or with a key that opens some values but not others, a retired key is
    // missing (say which and what it seals). Otherwise it is the wrong key altogether (below).
    let rotated = sealer.key_ids().len() > 1 || config.data_dir.join(RETIRED_KEYS_DIR).exists();
    if rotated || present.iter().any(|(_, kid)| sealer.knows_key(kid)) {
        every_value_opens(store, &present, &sealer, config).await?;
    }
    if let Some(kid) = expected
        && !sealer.knows_key(&kid)
    {
        bail!(
            "{source} has id {}, but this database's values are sealed with key {kid}: it is not the key this database \
             was created with. Restore the right key, or list the old one in retired_encryption_keys after a rotation. \
             Only if that key is lost for good: `oauth-broker admin keys forget {kid}` gives up what it sealed.",
            sealer.active_key_id()
        );
    }
    every_value_opens(store, &present, &sealer, config).await?;
    Ok(sealer)
}

/// Where `admin keys rotate` keeps the keys it retired (one `<key id>.key` file each), beside
/// the active `encryption.key`; they open old values until `admin keys rewrap` moved them.
pub const RETIRED_KEYS_DIR: &str = "retired-keys";

/// Reads the keys: the active one (the setting if given, else `data_dir/encryption.key`), then
/// every retired one (`data_dir/retired-keys/*.key`, then `retired_encryption_keys`). A server
/// calls it again when it meets a value under a key it does not know, or periodically, so a
/// rotation done by `admin keys rotate` reaches it without a restart.
pub fn key_loader(config: &Config, first: SecretString) -> crate::crypto::KeyLoader {
    let setting = config.encryption_key.clone();
    let data_dir = config.data_dir.clone();
    let retired = config.retired_encryption_keys.clone();
    Box::new(move || {
        let active = match &setting {
            Some(key) => key.clone(),
            None => {
                let path = data_dir.join("encryption.key");
                if path.exists() { read_key_file(&path).map_err(|e| format!("{e:#}"))? } else { first.clone() }
            }
        };
        let mut keys = vec![Sealer::parse_key(&active).map_err(|e| format!("the active encryption key: {e}"))?];
        for (path, encoded) in retired_key_files(&data_dir)? {
            keys.push(Sealer::parse_key(&encoded).map_err(|e| format!("{} is not usable: {e}", path.display()))?);
        }
        for (i, key) in retired.iter().enumerate() {
            keys.push(Sealer::parse_key(key).map_err(|e| format!("retired_encryption_keys[{i}] is not usable: {e}"))?);
        }
        Ok(keys)
    })
}

/// The retired key files, sorted by name.
pub fn retired_key_files(data_dir: &Path) -> Result<Vec<(PathBuf, SecretString)>, String> {
    let dir = data_dir.join(RETIRED_KEYS_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(format!("reading {}: {error}", dir.display())),
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "key"))
        .collect();
    paths.sort();
    paths.into_iter().map(|path| read_key_file(&path).map(|key| (path, key)).map_err(|e| format!("{e:#}"))).collect()
}

/// Refuses to start when any sealed value needs a key that is not loaded: never serve with
/// data that cannot be read, and never fall back to anything unsealed.
async fn every_value_opens(
    store: &Store,
    present: &[(SealedColumn, String)],
    sealer: &Sealer,
    config: &Config,
) -> anyhow::Result<()> {
    let mut missing: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
    for (column, key_id) in present {
        // A value too short to name a key (8 bytes, 16 hex digits) is corrupt, not under a
        // missing key: no key would open it, and the grant holding it is sent through a new
        // consent when it is read (`broker::tokens::broken`), so it must not stop start-up.
        let names_a_key = key_id.len() == 16;
        if names_a_key && !sealer.knows_key(key_id) {
            let count =
                store.sealed().count(*column, key_id).await.context("counting the values a missing key seals")?;
            missing.entry(key_id).or_default().push(format!("{count} {}", column.label()));
        }
    }
    let Some((kid, what)) = missing.iter().next() else { return Ok(()) };
    bail!(
        "this database holds values sealed with encryption key {kid} ({}), and that key is not loaded{}. \
         Put it back — as {} or in retired_encryption_keys — then run `oauth-broker admin keys rewrap` before \
         dropping it. Nothing was started. Only if the key is lost for good, with no backup: \
         `oauth-broker admin keys forget {kid}` gives up what it sealed (those grants need a new consent).",
        what.join(", "),
        if missing.len() > 1 {
            format!(" (nor {})", missing.keys().skip(1).copied().collect::<Vec<_>>().join(", "))
        } else {
            String::new()
        },
        config.data_dir.join(RETIRED_KEYS_DIR).join(format!("{kid}.key")).display()
    )
}

/// The id of the key the database's newest sealed value (its newest signing key) was sealed
/// with, if it holds any.
async fn sealed_with(store: &Store) -> anyhow::Result<Option<String>> {
    let keys = store.signing_keys().all().await.context("reading the database's signing keys")?;
    Ok(keys
        .iter()
        .find(|k| k.retired_at.is_none())
        .or(keys.first())
        .and_then(|k| Sealer::key_id_of(&k.private_key_sealed)))
}

pub(crate) fn read_key_file(path: &Path) -> anyhow::Result<SecretString> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading the encryption key file {}", path.display()))?;
    Ok(SecretString::from(text.trim().to_owned()))
}

fn create_key_file(config: &Config, path: &Path) -> anyhow::Result<SecretString> {
    std::fs::create_dir_all(&config.data_dir).with_context(|| format!("creating {}", config.data_dir.display()))?;
    let key = Sealer::generate_key();
    write_private_file(path, key.expose_secret().as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    tracing::warn!(path = %path.display(), "generated a new encryption key; back it up — without it stored tokens cannot be read");
    Ok(key)
}

pub(crate) fn write_private_file(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(contents)?;
    file.write_all(b"\n")
}
