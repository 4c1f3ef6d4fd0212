//! Watches the operator prompt directory by polling.
//!
//! Polling (every second) rather than inotify: inotify misses changes on network and
//! bind-mounted volumes and on Kubernetes ConfigMap symlink swaps, cannot watch a directory
//! that does not exist yet, and runs out of watches on busy hosts. A poll is one `stat` per
//! file, done on the blocking pool, so the async runtime never waits on the disk.
//!
//! A change is taken once the directory has been quiet for one debounce interval (bursts such
//! as `git checkout` or an editor's save-as-rename become one reload). The reloaded catalogue
//! replaces the old one and `Signal::PromptsChanged` goes out only if it differs, so touching
//! a file or saving it unchanged notifies nobody.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use super::files::OperatorPrompt;
use crate::events::Events;
use crate::events::Signal;

/// How often and how patiently the directory is looked at.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub poll: Duration,
    pub debounce: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self { poll: Duration::from_secs(1), debounce: Duration::from_millis(200) }
    }
}

/// Past this many quiet-period restarts a constantly changing directory is loaded anyway.
const MAX_SETTLE_ROUNDS: usize = 10;
/// Bounds on the walk, so a mistaken `prompts_dir = "/"` costs little.
const MAX_DEPTH: usize = 4;
const MAX_ENTRIES: usize = 10_000;

/// What the watcher updates.
pub(crate) struct Shared {
    operator: RwLock<Arc<Vec<Arc<OperatorPrompt>>>>,
    pub(crate) events: Events,
}

impl Shared {
    pub(crate) fn new(events: Events) -> Self {
        Self { operator: RwLock::default(), events }
    }

    /// The operator prompts now (a cheap clone; readers never block the watcher for long).
    pub(crate) fn snapshot(&self) -> Arc<Vec<Arc<OperatorPrompt>>> {
        self.operator.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Installs `loaded`; true when it differs from what was there.
    pub(crate) fn replace(&self, loaded: Vec<OperatorPrompt>) -> bool {
        let loaded: Vec<Arc<OperatorPrompt>> = loaded.into_iter().map(Arc::new).collect();
        let mut current = self.operator.write().unwrap_or_else(|p| p.into_inner());
        if **current == loaded {
            return false;
        }
        *current = Arc::new(loaded);
        true
    }
}

/// Polls until `shutdown` fires.
pub(crate) async fn run(shared: Arc<Shared>, dir: PathBuf, timing: Timing, shutdown: CancellationToken) {
    let mut last = fingerprint(&dir).await;
    // Whatever changed between the start-up load and now.
    reload(&shared, &dir).await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(timing.poll) => {}
        }
        let current = fingerprint(&dir).await;
        if current == last {
            continue;
        }
        let mut settled = current;
        for _ in 0..MAX_SETTLE_ROUNDS {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(timing.debounce) => {}
            }
            let again = fingerprint(&dir).await;
            if again == settled {
                break;
            }
            settled = again;
        }
        last = settled;
        reload(&shared, &dir).await;
    }
}

async fn reload(shared: &Shared, dir: &Path) {
    let dir = dir.to_owned();
    let loaded = tokio::task::spawn_blocking(move || super::load::load_dir(&dir, &super::builtin::NAMES)).await;
    match loaded {
        Ok(prompts) => {
            if shared.replace(prompts) {
                tracing::info!("prompt catalogue changed");
                shared.events.signal(Signal::PromptsChanged);
            }
        }
        Err(error) => tracing::error!(%error, "reloading prompts failed"),
    }
}

/// What a change to any file under the directory (prompt files and the images they use)
/// alters: path, size, modification time and, on Unix, inode and change time (an atomic
/// rename-over with the same size and mtime still shows).
#[derive(Debug, Default, PartialEq, Eq)]
struct Fingerprint(Vec<Stamp>);

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Stamp {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
    /// (inode, ctime seconds, ctime nanoseconds); zeros off Unix.
    identity: (u64, i64, i64),
}

async fn fingerprint(dir: &Path) -> Fingerprint {
    let dir = dir.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut entries = Vec::new();
        walk(&dir, 0, &mut entries);
        entries.sort();
        Fingerprint(entries)
    })
    .await
    .unwrap_or_default()
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<Stamp>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.filter_map(Result::ok) {
        if out.len() >= MAX_ENTRIES {
            return;
        }
        let path = entry.path();
        // Follows symlinks: a swapped link target is a change.
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        if meta.is_dir() {
            if depth < MAX_DEPTH {
                walk(&path, depth + 1, out);
            }
        } else {
            out.push(Stamp { len: meta.len(), modified: meta.modified().ok(), identity: identity(&meta), path });
        }
    }
}

#[cfg(unix)]
fn identity(meta: &std::fs::Metadata) -> (u64, i64, i64) {
    use std::os::unix::fs::MetadataExt;
    (meta.ino(), meta.ctime(), meta.ctime_nsec())
}

#[cfg(not(unix))]
fn identity(_meta: &std::fs::Metadata) -> (u64, i64, i64) {
    (0, 0, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Events;

    const FAST: Timing = Timing { poll: Duration::from_millis(30), debounce: Duration::from_millis(30) };

    fn prompt(name: &str, text: &str) -> String {
        format!(
            "name = \"{name}\"\n[[messages]]\nrole = \"user\"\ncontent = {{ type = \"text\", text = \"{text}\" }}\n"
        )
    }

    async fn next_signal(rx: &mut tokio::sync::broadcast::Receiver<Signal>, wait: Duration) -> Option<Signal> {
        tokio::time::timeout(wait, rx.recv()).await.ok().and_then(Result::ok)
    }

    #[tokio::test]
    async fn changes_reload_the_catalogue_and_signal_once_and_identical_results_do_not() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("prompts");
        let events = Events::new();
        let shared = Arc::new(Shared::new(events.clone()));
        let mut signals = events.subscribe_signals();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run(shared.clone(), dir.clone(), FAST, shutdown.clone()));

        // The directory does not exist yet; creating it with a file is a change.
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("a.toml"), prompt("a", "one")).unwrap();
        assert_eq!(next_signal(&mut signals, Duration::from_secs(5)).await, Some(Signal::PromptsChanged));
        assert_eq!(shared.snapshot().len(), 1);
        assert_eq!(next_signal(&mut signals, Duration::from_millis(300)).await, None, "one signal per change");

        // Same content again (and a broken file): the catalogue is identical, nobody is told.
        std::fs::write(dir.join("a.toml"), prompt("a", "one")).unwrap();
        std::fs::write(dir.join("broken.toml"), "name = ").unwrap();
        assert_eq!(next_signal(&mut signals, Duration::from_millis(500)).await, None);

        // Changing and removing are changes.
        std::fs::write(dir.join("a.toml"), prompt("a", "two")).unwrap();
        assert_eq!(next_signal(&mut signals, Duration::from_secs(5)).await, Some(Signal::PromptsChanged));
        std::fs::remove_file(dir.join("a.toml")).unwrap();
        assert_eq!(next_signal(&mut signals, Duration::from_secs(5)).await, Some(Signal::PromptsChanged));
        assert!(shared.snapshot().is_empty());

        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(5), task).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn an_image_change_is_a_change() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("img")).unwrap();
        std::fs::write(dir.path().join("img/a.png"), b"1").unwrap();
        let before = fingerprint(dir.path()).await;
        std::fs::write(dir.path().join("img/a.png"), b"22").unwrap();
        assert_ne!(before, fingerprint(dir.path()).await);
    }
}
