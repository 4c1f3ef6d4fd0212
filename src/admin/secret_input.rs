//! Secrets an operator hands a command: from an environment variable or standard input, never
//! from the command line (where every local user could read them with `ps`).

use std::io::Read;

use anyhow::Context;

/// The longest secret read: a header value or a client secret is never longer.
pub const SECRET_MAX: usize = 4096;

/// The secret, from the variable `env` names (its flag `flag` in messages) or standard input
/// (one trailing newline dropped).
pub fn read(env: Option<&str>, flag: &str) -> anyhow::Result<String> {
    if let Some(var) = env {
        return std::env::var(var).with_context(|| format!("{flag} {var}: no such environment variable"));
    }
    let mut text = String::new();
    std::io::stdin().take(SECRET_MAX as u64 + 2).read_to_string(&mut text).context("reading the secret from stdin")?;
    if text.len() > SECRET_MAX + 1 {
        anyhow::bail!("the secret is longer than {SECRET_MAX} bytes");
    }
    let trimmed = text.strip_suffix('\n').unwrap_or(&text);
    Ok(trimmed.strip_suffix('\r').unwrap_or(trimmed).to_owned())
}
