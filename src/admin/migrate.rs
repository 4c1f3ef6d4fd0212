//! `migrate` and `migrate --status`.

use std::sync::Arc;

use anyhow::Context;

use crate::clock::SystemClock;
use crate::config::Config;
use crate::config::redact_database_url;
use crate::store::AppliedMigration;

/// Brings the schema up to date, with everything else `serve` creates on first start.
pub async fn migrate(config: Config) -> anyhow::Result<()> {
    // The whole initialisation `serve` does — schema, sealing key, first signing key — so every
    // `admin` command after it finds a complete data directory (and none creates one).
    let state = crate::app::build_state(config, Arc::new(SystemClock)).await?;
    println!("database is up to date ({} migrations)", state.core.store.known_migrations().len());
    state.core.store.close().await;
    Ok(())
}

/// Says which migrations this database has and which `migrate` would apply; changes nothing
/// (not even creating a missing SQLite file).
pub async fn status(config: Config) -> anyhow::Result<()> {
    let shown = redact_database_url(&config.database_url);
    if let Some(path) = crate::store::sqlite_path(&config.database_url)
        && !path.exists()
    {
        // Which migrations a SQLite build knows does not need a database.
        let known = crate::store::known_sqlite_migrations();
        println!("no database at {} yet: `oauth-broker migrate` (or `serve`) creates it", path.display());
        print!("{}", render(&known, &[]));
        return Ok(());
    }
    let store = crate::startup::connect(&config).await?;
    let applied = store.applied_migrations().await.with_context(|| format!("reading the migrations of {shown}"));
    let known = store.known_migrations();
    store.close().await;
    println!("database {shown}");
    print!("{}", render(&known, &applied?));
    Ok(())
}

/// One line per migration, by version: `applied`, `pending` or `FAILED`, and any version this
/// binary does not know (a newer binary ran it), then a summary.
fn render(known: &[(i64, String)], applied: &[AppliedMigration]) -> String {
    let mut lines = Vec::new();
    let (mut done, mut pending, mut failed) = (0, 0, 0);
    for (version, description) in known {
        let state = match applied.iter().find(|a| a.version == *version) {
            Some(a) if a.success => {
                done += 1;
                "applied"
            }
            Some(_) => {
                failed += 1;
                "FAILED"
            }
            None => {
                pending += 1;
                "pending"
            }
        };
        lines.push(format!("{version:>4}  {state:<8} {description}"));
    }
    for a in applied.iter().filter(|a| !known.iter().any(|(v, _)| *v == a.version)) {
        let state = if a.success { "applied" } else { "FAILED" };
        lines.push(format!(
            "{:>4}  {state:<8} {} (unknown to this binary: a newer version ran it)",
            a.version, a.description
        ));
    }
    let mut summary = format!("{done} applied, {pending} pending");
    if failed > 0 {
        summary.push_str(&format!(", {failed} failed (see the database's _sqlx_migrations table)"));
    }
    if pending > 0 {
        summary.push_str("; `oauth-broker migrate` (or `serve`) applies what is pending");
    }
    format!("{}\n{summary}\n", lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> Vec<(i64, String)> {
        vec![(1, "initial".into()), (2, "grant accounts".into()), (3, "services".into())]
    }

    #[test]
    fn status_names_each_migration_applied_or_pending() {
        let applied = [AppliedMigration { version: 1, description: "initial".into(), success: true }];
        let text = render(&known(), &applied);
        assert!(text.contains("   1  applied  initial"), "{text}");
        assert!(text.contains("   2  pending  grant accounts"), "{text}");
        assert!(text.contains("   3  pending  services"), "{text}");
        assert!(text.contains("1 applied, 2 pending"), "{text}");
    }

    #[test]
    fn status_shows_failed_and_unknown_versions() {
        let applied = [
            AppliedMigration { version: 1, description: "initial".into(), success: true },
            AppliedMigration { version: 2, description: "grant accounts".into(), success: false },
            AppliedMigration { version: 3, description: "services".into(), success: true },
            AppliedMigration { version: 9, description: "from the future".into(), success: true },
        ];
        let text = render(&known(), &applied);
        assert!(text.contains("   2  FAILED   grant accounts"), "{text}");
        assert!(text.contains("   9  applied  from the future (unknown to this binary"), "{text}");
        assert!(text.contains("2 applied, 0 pending, 1 failed"), "{text}");
    }
}
