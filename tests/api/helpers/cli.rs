//! The binaries as processes: the broker's (as an operator runs it, against a running app's
//! database and key) and the examples' (built beside the test binary by `cargo test`).

use std::process::Command;

use super::TestApp;

/// The broker's binary. `OAUTH_BROKER_TEST_BIN` names a copy when several worktrees share one
/// target directory (another build may replace the shared binary between build and test).
pub fn binary() -> String {
    std::env::var("OAUTH_BROKER_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_oauth-broker").to_owned())
}

/// Runs `admin …` in a process of its own against the app's database; must succeed.
pub(crate) async fn admin_elsewhere(app: &TestApp, args: &[&str]) -> String {
    let output = crate::helpers::cli::broker_for(app).arg("admin").args(args).output().await.unwrap();
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn broker(data_dir: &std::path::Path, public_url: &str) -> Command {
    let mut command = Command::new(crate::helpers::binary());
    command.env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
    command.env("OAUTH_BROKER_DATA_DIR", data_dir).env("OAUTH_BROKER_PUBLIC_URL", public_url);
    command
}

/// The binary with `app`'s database and key (given by environment, as an operator would).
pub(crate) fn broker_for(app: &TestApp) -> tokio::process::Command {
    use secrecy::ExposeSecret;
    let key = app.state.core.config.encryption_key.as_ref().unwrap().expose_secret().to_owned();
    let mut command = broker(&app.state.core.config.data_dir, &app.address);
    command
        .env("OAUTH_BROKER_DATABASE_URL", &app.state.core.config.database_url)
        .env("OAUTH_BROKER_ENCRYPTION_KEY", key)
        .env("OAUTH_BROKER_DEMO", "true");
    tokio::process::Command::from(command)
}

/// An example binary next to the test binary (`target/<profile>/examples/NAME`).
pub(crate) fn example_binary(name: &str) -> std::path::PathBuf {
    let test_binary = std::env::current_exe().unwrap();
    let profile_dir = test_binary.parent().and_then(|deps| deps.parent()).unwrap();
    let path = profile_dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: `cargo test` builds the examples (or run `cargo build --example {name}`)",
        path.display()
    );
    path
}
