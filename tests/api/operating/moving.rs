//! Moving the broker to another public URL (a test address to the real domain, another port)
//! is an ordinary change: local accounts made under the old URL keep signing in, their MCP
//! clients connect providers at the new address, and `admin tokens issue` works there. Admin
//! commands that write the URL refuse to guess it.

use serde_json::json;

use crate::helpers::*;
use crate::on_both_backends;

async fn a_broker_that_moved_keeps_its_local_accounts_working(first: &TestApp) {
    let old_url = first.url("");
    let moved = spawn_app_opts(
        Backend::Sqlite, // unused: the second instance opens the first one's database
        SpawnOptions { instance_of: Some(first.instance()), own_public_url: true, ..Default::default() },
        |builder| builder,
    )
    .await
    .unwrap();
    assert_ne!(moved.state.core.config.issuer(), old_url.trim_end_matches('/'), "the public URL changed");
    let alice = moved.state.core.store.users().by_username(ALICE).await.unwrap().unwrap();
    assert_eq!(alice.issuer, old_url.trim_end_matches('/'), "the account was made under the old URL");

    // A token from the moved broker opens /mcp, and a connect flow runs at the new address.
    let client = std::sync::Arc::new(moved.mcp_client(ALICE, ClientKind::Url).await);
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.call("connect_account", json!({"provider": "demo", "scopes": ["profile"]})).await }
    });
    let (url, _) = client.next_url_elicitation().await;
    assert!(url.starts_with(&moved.url("/connect/")), "the link is at the new address: {url}");
    let browser = moved.browser();
    assert_eq!(moved.approve_in_browser(&browser, &url, ALICE).await.status(), 200);
    let result = call.await.unwrap().unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let me = client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
    assert_eq!(me.unwrap().structured_content.unwrap()["status"], 200);
    std::sync::Arc::into_inner(client).unwrap().close().await;

    // `admin tokens issue` with the new settings prints a token the moved broker accepts.
    let issued =
        crate::helpers::cli::broker_for(&moved).args(["admin", "tokens", "issue", ALICE]).output().await.unwrap();
    assert!(issued.status.success(), "{}", String::from_utf8_lossy(&issued.stderr));
    let token = String::from_utf8(issued.stdout).unwrap().trim().to_owned();
    let answered = moved.mcp_client_with_token(&token, ClientKind::Url).await;
    assert!(answered.is_ok(), "the CLI's token opens /mcp at the new address");
    answered.unwrap().close().await;
    moved.stop().await;
}
on_both_backends!(moved_broker, a_broker_that_moved_keeps_its_local_accounts_working);

/// `admin users add` and `admin tokens issue` without the server's public URL would store or
/// sign `http://127.0.0.1:8080` (made from the default --listen): they refuse and say what to pass.
async fn admin_commands_refuse_to_guess_the_public_url(app: &TestApp) {
    for args in [&["users", "add", "erin"][..], &["tokens", "issue", ALICE]] {
        let output = crate::helpers::cli::broker_for(app)
            .env_remove("OAUTH_BROKER_PUBLIC_URL")
            .arg("admin")
            .args(args)
            .output()
            .await
            .unwrap();
        assert!(!output.status.success(), "{args:?} is refused");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--public-url") && stderr.contains("http://127.0.0.1:8080"), "{args:?}: {stderr}");
    }
    assert!(app.state.core.store.users().by_username("erin").await.unwrap().is_none(), "nothing was written");
}
on_both_backends!(public_url_not_guessed, admin_commands_refuse_to_guess_the_public_url);
