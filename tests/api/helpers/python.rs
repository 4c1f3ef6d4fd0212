//! The official MCP Python SDK: the interpreter that has it, and its echo server
//! (`tests/python/echo_server.py`) as a server behind the broker.
//!
//! The interpreter is `MCP_PYTHON`, else the venv `bash .ci/python.sh` makes under `.ci/python/`.
//! Without it the tests print `SKIPPED python: …`, unless `REQUIRE_PYTHON_MCP=1` (CI, see
//! `.ci/run`), where they fail instead.

use std::path::PathBuf;

use super::TestApp;
use super::gateway::Upstream;

/// The Python server, checking every request's bearer token at `app`'s demo provider.
pub async fn python_server(app: &TestApp) -> Option<Upstream> {
    let python = crate::helpers::python::python()?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/echo_server.py");
    let mut command = tokio::process::Command::new(python);
    command.arg(script).args(["--require-bearer", &app.url("/demo-provider")]);
    Some(Upstream::spawn(command).await)
}

/// The interpreter that has the SDK, or `None` after printing why the test skips.
pub(crate) fn python() -> Option<PathBuf> {
    let path = std::env::var_os("MCP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/python/bin/python"));
    if path.is_file() {
        return Some(path);
    }
    let reason = format!("no Python with the MCP SDK at {} (run `bash .ci/python.sh` once)", path.display());
    if std::env::var("REQUIRE_PYTHON_MCP").is_ok_and(|v| v == "1") {
        panic!("REQUIRE_PYTHON_MCP=1 but {reason}");
    }
    eprintln!("SKIPPED python: {reason}");
    None
}
