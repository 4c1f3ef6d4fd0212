//! `serve --demo`: a demo account on first start, and everything needed to try the flow.

use secrecy::ExposeSecret;

use crate::identity::password;
use crate::state::AppState;

pub const DEMO_USER: &str = "demo";
/// The `--client` label of the token printed at start: the demo client's approvals are kept
/// for this label, so a reissued token must carry it too.
pub const DEMO_CLIENT: &str = "demo_client";
/// The variable the bundled `demo_client` example reads its bearer token from.
pub const TOKEN_VAR: &str = "OAUTH_BROKER_TOKEN";
const DEMO_TOKEN_TTL_SECONDS: i64 = 24 * 3600;

/// The banner goes to the operator's terminal. `serve` keeps Rust's ignored SIGPIPE (a peer
/// closing its socket must never end the server), so `println!` would panic on a closed stdout
/// (`serve --demo | head -3`) and stop the server; a banner nobody reads is dropped instead.
macro_rules! show {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

pub async fn print_demo_setup(state: &AppState) -> anyhow::Result<()> {
    if let Some(oidc) = &state.identity.oidc {
        // Users and their tokens come from the identity provider: no local account, and a token
        // issued here would be refused at /mcp. The demo provider works the same.
        show!(
            "\n=== oauth-broker demo (identity from {issuer}) ===\n\
             MCP endpoint: {mcp}\n\
             The demo provider is at {provider}; connect it from any MCP client that signs in at\n\
             {issuer} (its access token for {mcp} is the bearer token), and sign in to the broker's\n\
             pages with the same identity provider.\n",
            issuer = oidc.issuer(),
            mcp = state.core.config.mcp_url(),
            provider = state.core.config.url("/demo-provider/"),
        );
        return Ok(());
    }
    let created_password = match state.core.store.users().by_username(DEMO_USER).await? {
        Some(_) => None,
        None => {
            let secret = password::generate_password();
            let hash = password::hash_password(&secret)?;
            state
                .core
                .store
                .users()
                .create_local(&state.core.config.issuer(), DEMO_USER, &hash, state.core.now())
                .await?;
            Some(secret)
        }
    };
    let token = super::users::issue_token_for(state, DEMO_USER, Some(DEMO_CLIENT), DEMO_TOKEN_TTL_SECONDS).await?;
    let mcp = state.core.config.mcp_url();
    let sign_in = match &created_password {
        Some(secret) => format!(
            "  username: {DEMO_USER}\n  password: {}   (shown once; to reset: `oauth-broker admin users passwd {DEMO_USER}` reads a new one from stdin)",
            secret.expose_secret()
        ),
        None => format!(
            "  username: {DEMO_USER}   (password was shown on first start; to reset: `oauth-broker admin users passwd {DEMO_USER}` reads a new one from stdin)"
        ),
    };
    // Printed to stdout on purpose: this is the operator's own terminal, on a demo set-up. The
    // client command passes the token in its environment: every local user can read a
    // process's arguments (`ps`), but only its owner its environment.
    show!(
        "\n=== oauth-broker demo ===\n\
         MCP endpoint: {mcp}\n\
         Sign in to the broker's pages as\n{sign_in}\n\
         Bearer token for MCP clients (valid 24 h):\n  {token}\n\n\
         Try the whole flow with the bundled client:\n  {TOKEN_VAR}={token} cargo run --example demo_client -- --url {mcp}\n\
         or any MCP client with the header `Authorization: Bearer <token>`.\n\
         A new token for the same client (keeps its approvals; give admin the same settings as serve):\n  \
         oauth-broker admin tokens issue {DEMO_USER} --client {DEMO_CLIENT} --ttl 24h --public-url {public_url}\n",
        public_url = state.core.config.issuer(),
    );
    Ok(())
}
