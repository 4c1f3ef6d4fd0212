//! Loads the operator prompt directory: every `*.toml` and `*.md` at its top level (hidden
//! files, editor droppings and subdirectories are ignored; subdirectories may hold images).
//!
//! A file that does not parse, or whose name is taken, is logged with its path and reason and
//! skipped: one broken file never takes the rest down. A missing directory is simply no
//! operator prompts. Blocking I/O: call it from start-up or `spawn_blocking`.

use std::path::{Path, PathBuf};

use super::files::{self, OperatorPrompt};

/// The directory's prompts, sorted by name. `reserved` are names already taken (built-ins).
pub fn load_dir(dir: &Path, reserved: &[&str]) -> Vec<OperatorPrompt> {
    let mut prompts: Vec<OperatorPrompt> = Vec::new();
    for path in prompt_files(dir) {
        match files::load(&path, dir) {
            Ok(prompt) if reserved.contains(&prompt.name()) => {
                tracing::warn!(path = %path.display(), name = prompt.name(), "skipping prompt file: a built-in prompt has this name");
            }
            Ok(prompt) if prompts.iter().any(|p| p.name() == prompt.name()) => {
                tracing::warn!(path = %path.display(), name = prompt.name(), "skipping prompt file: an earlier file (by file name) already defines this name");
            }
            Ok(prompt) => prompts.push(prompt),
            Err(error) => {
                tracing::warn!(path = %path.display(), reason = %error, "skipping prompt file");
            }
        }
    }
    prompts.sort_by(|a, b| a.name().cmp(b.name()));
    prompts
}

/// Candidate files, sorted by file name so "the earlier file" is well defined.
fn prompt_files(dir: &Path) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            tracing::debug!(path = %dir.display(), "no prompts directory: no operator prompts");
            return Vec::new();
        }
        Err(error) => {
            tracing::warn!(path = %dir.display(), reason = %error, "cannot read the prompts directory");
            return Vec::new();
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            let hidden =
                path.file_name().and_then(|n| n.to_str()).is_none_or(|n| n.starts_with('.') || n.ends_with('~'));
            // `metadata` follows symlinks (Kubernetes ConfigMaps mount files as symlinks).
            !hidden && files::extension(path).is_some() && std::fs::metadata(path).is_ok_and(|m| m.is_file())
        })
        .collect();
    paths.sort();
    paths
}

#[cfg(test)]
mod tests {

    use super::*;

    fn text(name: &str, body: &str) -> String {
        format!(
            "name = \"{name}\"\n[[messages]]\nrole = \"user\"\ncontent = {{ type = \"text\", text = \"{body}\" }}\n"
        )
    }

    #[test]
    fn a_missing_directory_is_no_prompts() {
        let d = tempfile::tempdir().unwrap();
        assert!(load_dir(&d.path().join("absent"), &[]).is_empty());
    }

    #[test]
    fn a_broken_file_is_logged_with_path_and_reason_and_the_rest_loads() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a_good.toml"), text("good", "fine")).unwrap();
        std::fs::write(d.path().join("b_broken.toml"), text("broken", "{{undeclared}}")).unwrap();
        std::fs::write(d.path().join("c.md"), "+++\n+++\nmarkdown body").unwrap();
        let (prompts, logs) = crate::telemetry::captured::logs(|| load_dir(d.path(), &[]));
        let names: Vec<&str> = prompts.iter().map(|p| p.name()).collect();
        assert_eq!(names, ["c", "good"]);
        assert!(logs.contains("b_broken.toml"), "{logs}");
        assert!(logs.contains("{{undeclared}}"), "{logs}");
        assert!(logs.contains("WARN"), "{logs}");
    }

    #[test]
    fn taken_names_are_skipped_with_a_warning() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("1.toml"), text("dup", "first")).unwrap();
        std::fs::write(d.path().join("2.toml"), text("dup", "second")).unwrap();
        std::fs::write(d.path().join("3.toml"), text("connect_provider", "mine")).unwrap();
        let (prompts, logs) = crate::telemetry::captured::logs(|| load_dir(d.path(), &["connect_provider"]));
        assert_eq!(prompts.len(), 1);
        assert_eq!(prompts[0].render(&Default::default()).messages[0].content.as_text().unwrap().text, "first");
        assert!(logs.contains("2.toml") && logs.contains("3.toml"), "{logs}");
    }

    #[test]
    fn hidden_files_other_extensions_and_directories_are_ignored() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(".hidden.toml"), text("hidden", "x")).unwrap();
        std::fs::write(d.path().join("backup.toml~"), text("backup", "x")).unwrap();
        std::fs::write(d.path().join("readme.txt"), "x").unwrap();
        std::fs::create_dir(d.path().join("dir.toml")).unwrap();
        assert!(load_dir(d.path(), &[]).is_empty());
    }
}
