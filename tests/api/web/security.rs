//! Every state / PKCE / CSRF / identity check, attacked.

use rmcp::ServiceError;
use serde_json::json;

use oauth_broker::store::authorizations::AuthorizationStatus;

use crate::helpers::{ALICE, BOB, ClientKind, TestApp, hidden_field, location};
use crate::on_both_backends;

/// Starts a connect attempt for `name` and returns (connect URL, elicitation id).
async fn pending_link(app: &TestApp, name: &str) -> (String, String) {
    let client = app.mcp_client(name, ClientKind::Url).await;
    let error = match client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await
    {
        Err(ServiceError::McpError(e)) => e,
        other => panic!("expected -32042, got {other:?}"),
    };
    let e = &error.data.unwrap()["elicitations"][0];
    (e["url"].as_str().unwrap().to_owned(), e["elicitationId"].as_str().unwrap().to_owned())
}

/// Signs in, approves on the consent page, and returns the provider authorize URL.
async fn approve_consent(app: &TestApp, browser: &reqwest::Client, url: &str, name: &str) -> String {
    let path = url.strip_prefix(&app.address).unwrap().to_owned();
    app.sign_in(browser, name, &path).await;
    let consent = browser.get(url).send().await.unwrap().text().await.unwrap();
    let csrf = hidden_field(&consent, "csrf_token").unwrap();
    let approved =
        browser.post(url).form(&[("csrf_token", csrf.as_str()), ("action", "approve")]).send().await.unwrap();
    assert_eq!(approved.status(), 303);
    location(&approved)
}

async fn status_of(app: &TestApp, id: &str) -> AuthorizationStatus {
    app.state.core.store.authorizations().by_id(id).await.unwrap().unwrap().status
}

async fn alice_has_grant(app: &TestApp) -> bool {
    app.state.core.store.grants().latest(&app.user_id(ALICE).await, "demo", None).await.unwrap().is_some()
}

async fn a_forwarded_link_opened_by_another_user_is_refused_and_changes_nothing(app: &TestApp) {
    // Alice's link, opened by Bob (the URL-elicitation phishing scenario).
    let (url, id) = pending_link(app, ALICE).await;
    let bob = app.browser();
    let path = url.strip_prefix(&app.address).unwrap().to_owned();
    app.sign_in(&bob, BOB, &path).await;
    let page = bob.get(&url).send().await.unwrap();
    assert_eq!(page.status(), 403);
    let html = page.text().await.unwrap();
    assert!(!html.contains("value=\"approve\""), "no consent form for the wrong user");
    assert!(html.contains("another account"), "the page says why");

    // Even with Bob's own valid CSRF token (from his home page session), posting fails.
    let home = bob.get(app.url("/")).send().await.unwrap().text().await.unwrap();
    let bob_csrf = hidden_field(&home, "csrf_token").unwrap_or_default();
    let posted = bob.post(&url).form(&[("csrf_token", bob_csrf.as_str()), ("action", "approve")]).send().await.unwrap();
    assert_eq!(posted.status(), 403);
    assert_eq!(status_of(app, &id).await, AuthorizationStatus::Pending, "nothing changed");
    let denied = bob.post(&url).form(&[("csrf_token", bob_csrf.as_str()), ("action", "deny")]).send().await.unwrap();
    assert_eq!(denied.status(), 403);
    assert_eq!(status_of(app, &id).await, AuthorizationStatus::Pending, "Bob cannot decline for Alice either");
}
on_both_backends!(phishing_rule, a_forwarded_link_opened_by_another_user_is_refused_and_changes_nothing);

async fn consent_requires_a_signed_in_owner_and_a_valid_csrf_token(app: &TestApp) {
    let (url, id) = pending_link(app, ALICE).await;
    // No browser session: sent to sign in, for GET and POST alike.
    let anonymous = app.browser();
    let page = anonymous.get(&url).send().await.unwrap();
    assert_eq!(page.status(), 303);
    assert!(location(&page).starts_with("/login?next="), "{}", location(&page));
    let posted = anonymous.post(&url).form(&[("csrf_token", "x"), ("action", "approve")]).send().await.unwrap();
    assert!(posted.status() == 303 || posted.status() == 403);
    assert_eq!(status_of(app, &id).await, AuthorizationStatus::Pending);

    // Signed in, but with a missing or forged CSRF token.
    let browser = app.browser();
    let path = url.strip_prefix(&app.address).unwrap().to_owned();
    app.sign_in(&browser, ALICE, &path).await;
    for forged in ["", "forged-token"] {
        let posted = browser.post(&url).form(&[("csrf_token", forged), ("action", "approve")]).send().await.unwrap();
        assert_eq!(posted.status(), 403, "csrf {forged:?}");
    }
    assert_eq!(status_of(app, &id).await, AuthorizationStatus::Pending);
    let row = app.state.core.store.authorizations().by_id(&id).await.unwrap().unwrap();
    assert!(row.state_hash.is_none(), "no state is stored before consent");
}
on_both_backends!(consent_csrf, consent_requires_a_signed_in_owner_and_a_valid_csrf_token);

async fn the_provider_redirect_uses_pkce_s256_exact_redirect_uri_and_no_secrets(app: &TestApp) {
    let (url, _) = pending_link(app, ALICE).await;
    let browser = app.browser();
    let authorize = approve_consent(app, &browser, &url, ALICE).await;
    let parsed = url::Url::parse(&authorize).unwrap();
    let q: std::collections::HashMap<_, _> = parsed.query_pairs().into_owned().collect();
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["code_challenge"].len(), 43);
    assert_eq!(q["redirect_uri"], app.url("/oauth/callback/demo"), "the demo provider's own callback");
    assert!(q["state"].len() >= 43, "state has at least 256 bits");
    for forbidden in ["client_secret", "code_verifier", "access_token"] {
        assert!(!q.contains_key(forbidden), "{forbidden} must not be in the authorize URL");
    }
    // The state is stored hashed, never in clear.
    let rows = app.state.core.store.authorizations().for_user(&app.user_id(ALICE).await, 10).await.unwrap();
    assert!(rows.iter().all(|r| r.state_hash.as_deref() != Some(q["state"].as_str())));
}
on_both_backends!(authorize_request, the_provider_redirect_uses_pkce_s256_exact_redirect_uri_and_no_secrets);

async fn a_callback_state_works_once_and_only_in_the_browser_that_approved(app: &TestApp) {
    let (url, id) = pending_link(app, ALICE).await;
    let browser = app.browser();
    let authorize = approve_consent(app, &browser, &url, ALICE).await;
    let callback = app.demo_provider_redirect(&browser, &authorize, "demo-user", "approve").await;

    // Another browser, even signed in as Alice, cannot use this callback (state is bound to
    // the approving browser session; a stolen or injected code fails).
    let other = app.browser();
    app.sign_in(&other, ALICE, "/").await;
    assert_eq!(app.land(&other, &callback).await.status(), 400);
    assert_eq!(status_of(app, &id).await, AuthorizationStatus::Redirected, "the other browser changed nothing");

    // Unknown or tampered state: refused, no token request.
    let tampered = callback.replace("state=", "state=x");
    assert_eq!(app.land(&browser, &tampered).await.status(), 400);

    // The approving browser completes; a replay of the same callback is refused.
    assert_eq!(app.land(&browser, &callback).await.status(), 200);
    assert_eq!(status_of(app, &id).await, AuthorizationStatus::Completed);
    let grant_before =
        app.state.core.store.grants().latest(&app.user_id(ALICE).await, "demo", None).await.unwrap().unwrap();
    assert_eq!(app.land(&browser, &callback).await.status(), 400);
    let grant_after =
        app.state.core.store.grants().latest(&app.user_id(ALICE).await, "demo", None).await.unwrap().unwrap();
    assert_eq!(grant_before.version, grant_after.version, "a replay stores nothing");
}
on_both_backends!(callback_state, a_callback_state_works_once_and_only_in_the_browser_that_approved);

async fn a_callback_from_an_unexpected_issuer_is_refused(app: &TestApp) {
    let (url, id) = pending_link(app, ALICE).await;
    let browser = app.browser();
    let authorize = approve_consent(app, &browser, &url, ALICE).await;
    let callback = app.demo_provider_redirect(&browser, &authorize, "demo-user", "approve").await;
    let mut parsed = url::Url::parse(&callback).unwrap();
    let pairs: Vec<(String, String)> = parsed.query_pairs().into_owned().collect();
    let mut without_iss = parsed.clone();
    without_iss.query_pairs_mut().clear().extend_pairs(pairs.iter().filter(|(k, _)| k != "iss"));
    parsed.query_pairs_mut().clear().extend_pairs(pairs.iter().map(|(k, v)| {
        if k == "iss" { (k.clone(), "https://evil.example".to_owned()) } else { (k.clone(), v.clone()) }
    }));
    // RFC 9207: mismatched or missing iss from a provider that sends it → refused.
    assert_eq!(app.land(&browser, parsed.as_str()).await.status(), 400);
    assert_eq!(app.land(&browser, without_iss.as_str()).await.status(), 400);
    assert!(!alice_has_grant(app).await);
    assert_ne!(status_of(app, &id).await, AuthorizationStatus::Completed);
}
on_both_backends!(issuer_check, a_callback_from_an_unexpected_issuer_is_refused);

async fn a_provider_error_fails_the_attempt_and_an_expired_link_is_refused(app: &TestApp) {
    let (url, id) = pending_link(app, ALICE).await;
    let browser = app.browser();
    let authorize = approve_consent(app, &browser, &url, ALICE).await;
    let callback = app.demo_provider_redirect(&browser, &authorize, "demo-user", "deny").await;
    assert!(callback.contains("error=access_denied"));
    let page = app.land(&browser, &callback).await;
    assert!(page.status().is_client_error() || page.status() == 200);
    assert_eq!(status_of(app, &id).await, AuthorizationStatus::Failed);
    assert!(!alice_has_grant(app).await);

    // A fresh link expires after the authorization TTL (10 minutes).
    let (url, _) = pending_link(app, ALICE).await;
    app.clock.advance(11 * 60);
    assert_eq!(browser.get(&url).send().await.unwrap().status(), 410);
}
on_both_backends!(provider_error_and_expiry, a_provider_error_fails_the_attempt_and_an_expired_link_is_refused);

async fn tokens_are_sealed_at_rest_and_bound_to_their_row(app: &TestApp) {
    let (url, _) = pending_link(app, ALICE).await;
    let browser = app.browser();
    assert_eq!(app.approve_in_browser(&browser, &url, ALICE).await.status(), 200);
    let grant = app.state.core.store.grants().latest(&app.user_id(ALICE).await, "demo", None).await.unwrap().unwrap();
    let owner = format!("{}/demo", grant.user_id);
    let ctx =
        oauth_broker::crypto::SealContext { table: "grants", column: "access_token", row_id: &grant.id, owner: &owner };
    let token = app.state.core.sealer.open(&grant.access_token_sealed, ctx).unwrap();
    assert!(token.len() >= 32);
    assert!(!grant.access_token_sealed.windows(token.len()).any(|w| w == token.as_slice()), "no plaintext at rest");
    // The same blob does not open as another user's token.
    let other_owner = format!("{}/demo", app.user_id(BOB).await);
    let moved = oauth_broker::crypto::SealContext {
        table: "grants",
        column: "access_token",
        row_id: &grant.id,
        owner: &other_owner,
    };
    assert!(app.state.core.sealer.open(&grant.access_token_sealed, moved).is_err());
    // And the MCP client never sees it.
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let echo =
        client.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/echo"})).await.unwrap();
    let text = serde_json::to_string(&echo).unwrap();
    assert!(!text.contains(std::str::from_utf8(&token).unwrap()), "token leaked into an MCP message");
}
on_both_backends!(sealed_tokens, tokens_are_sealed_at_rest_and_bound_to_their_row);

async fn an_mcp_session_cannot_be_used_with_another_users_token(app: &TestApp) {
    let http = app.http();
    let alice = app.token_for(ALICE).await;
    let bob = app.token_for(BOB).await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let response = http
        .post(app.mcp_url())
        .bearer_auth(&alice)
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = response.headers().get("mcp-session-id").unwrap().to_str().unwrap().to_owned();
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let hijack = http
        .post(app.mcp_url())
        .bearer_auth(&bob)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(hijack.status(), 403);
    // Without any token the session id alone is worthless.
    let bare = http.post(app.mcp_url()).header("mcp-session-id", &session).json(&ping).send().await.unwrap();
    assert_eq!(bare.status(), 401);
}
on_both_backends!(session_binding, an_mcp_session_cannot_be_used_with_another_users_token);

async fn the_connections_page_lists_and_revokes_only_the_users_own_connections(app: &TestApp) {
    let (url, _) = pending_link(app, ALICE).await;
    let browser = app.browser();
    assert_eq!(app.approve_in_browser(&browser, &url, ALICE).await.status(), 200);
    let page = browser.get(app.url("/connections")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("Demo Provider") && html.contains("demo-user"), "{html}");
    let grant_id = hidden_field(&html, "grant_id").unwrap();
    let csrf = hidden_field(&html, "csrf_token").unwrap();

    // Bob cannot revoke Alice's connection with his own session and CSRF token.
    let bob = app.browser();
    app.sign_in(&bob, BOB, "/").await;
    let bob_page = bob.get(app.url("/connections")).send().await.unwrap().text().await.unwrap();
    assert!(!bob_page.contains("demo-user"), "Bob sees only his own connections");
    let bob_csrf = hidden_field(&bob_page, "csrf_token").unwrap();
    let attempt = bob
        .post(app.url("/connections/revoke"))
        .form(&[("csrf_token", bob_csrf.as_str()), ("grant_id", grant_id.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(attempt.status(), 404);
    assert!(alice_has_grant(app).await);
    // Alice without the CSRF token: refused.
    let forged = browser
        .post(app.url("/connections/revoke"))
        .form(&[("csrf_token", "x"), ("grant_id", grant_id.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    assert!(alice_has_grant(app).await);
    // Alice revokes.
    let revoked = browser
        .post(app.url("/connections/revoke"))
        .form(&[("csrf_token", csrf.as_str()), ("grant_id", grant_id.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 303);
    assert!(!alice_has_grant(app).await);

    // Sign out everywhere ends every browser session of Alice.
    let second = app.browser();
    app.sign_in(&second, ALICE, "/").await;
    let everywhere =
        browser.post(app.url("/logout/everywhere")).form(&[("csrf_token", csrf.as_str())]).send().await.unwrap();
    assert_eq!(everywhere.status(), 303);
    for b in [&browser, &second] {
        let page = b.get(app.url("/connections")).send().await.unwrap();
        assert_eq!(page.status(), 303, "signed out");
    }
}
on_both_backends!(connections_page, the_connections_page_lists_and_revokes_only_the_users_own_connections);
