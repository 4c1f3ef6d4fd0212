//! The broker as an OAuth 2.1 authorization server for MCP clients: metadata, dynamic
//! registration, client ID metadata documents, /authorize with sign-in and consent, /token with
//! PKCE and refresh rotation — and every attack on them: wrong redirect URI, missing or plain
//! PKCE, wrong verifier, code reuse, another client's code, wrong resource, forged consent,
//! expired code, replayed refresh token. One story drives rmcp's own OAuth client end to end.

use std::collections::HashMap;

use oauth_broker::authorization_server::client_metadata_document;
use oauth_broker::identity::ClientIdentity;
use serde_json::{Value, json};

use crate::helpers::authorization_server::{
    REDIRECT_URI, STATE, TOOL_SERVER, authorize_params, authorize_url, callback_params, consent_page, jwt_claims,
    new_pkce, register, register_public_client, submit_consent, token_request, tool_server_tokens, with,
};
use crate::helpers::{ALICE, Backend, ClientKind, TestApp, location, spawn_app};
use crate::on_both_backends;

/// The whole browser leg as alice, approving: returns the code.
async fn authorize_code(app: &TestApp, client_id: &str, challenge: &str) -> String {
    let browser = app.browser();
    let url = authorize_url(app, &authorize_params(app, client_id, challenge));
    let html = consent_page(app, &browser, &url).await;
    let params = callback_params(&submit_consent(app, &browser, &html, "approve", |_| {}).await);
    assert_eq!(params["state"], STATE);
    assert_eq!(params["iss"], app.address, "RFC 9207 iss");
    params["code"].clone()
}

async fn exchange(app: &TestApp, client_id: &str, code: &str, verifier: &str) -> reqwest::Response {
    let mcp_url = app.mcp_url();
    token_request(
        app,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", client_id),
            ("code", code),
            ("redirect_uri", REDIRECT_URI),
            ("code_verifier", verifier),
            ("resource", &mcp_url),
        ],
    )
    .await
}

async fn refresh(app: &TestApp, client_id: &str, refresh_token: &str) -> reqwest::Response {
    token_request(app, &[("grant_type", "refresh_token"), ("client_id", client_id), ("refresh_token", refresh_token)])
        .await
}

/// Status and RFC 6749 `error` of a failed token or registration request.
async fn oauth_error(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    (status, body["error"].as_str().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn metadata_names_every_endpoint_and_only_what_is_supported() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let response = app.http().get(app.url("/.well-known/oauth-authorization-server")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let m: Value = response.json().await.unwrap();
    assert_eq!(m["issuer"], app.address);
    assert_eq!(m["authorization_endpoint"], app.url("/authorize"));
    assert_eq!(m["token_endpoint"], app.url("/token"));
    assert_eq!(m["registration_endpoint"], app.url("/register"));
    assert_eq!(m["revocation_endpoint"], app.url("/revoke"));
    assert_eq!(m["jwks_uri"], app.url("/.well-known/jwks.json"));
    assert_eq!(m["response_types_supported"], json!(["code"]));
    assert_eq!(m["grant_types_supported"], json!(["authorization_code", "refresh_token"]));
    assert_eq!(m["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(
        m["token_endpoint_auth_methods_supported"],
        json!(["none", "client_secret_basic", "client_secret_post"])
    );
    assert_eq!(m["client_id_metadata_document_supported"], true);
    assert_eq!(m["authorization_response_iss_parameter_supported"], true);
    // The protected resource names this issuer, so clients find this document from /mcp.
    let prm: Value = app
        .http()
        .get(app.url("/.well-known/oauth-protected-resource/mcp"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(prm["authorization_servers"][0], m["issuer"]);
    // No ID tokens or userinfo here, so no OpenID configuration either.
    let oidc = app.http().get(app.url("/.well-known/openid-configuration")).send().await.unwrap();
    assert_eq!(oidc.status(), 404);
    app.stop().await;
}

#[tokio::test]
async fn registration_accepts_https_and_loopback_redirects_and_refuses_the_rest() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let public = register(
        &app,
        json!({"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none",
                                       "client_name": "Public tool"}),
    )
    .await;
    assert_eq!(public.status(), 201);
    assert_eq!(public.headers()["cache-control"], "no-store");
    let body: Value = public.json().await.unwrap();
    assert!(body["client_id"].as_str().is_some_and(|id| id.len() >= 20));
    assert!(body.get("client_secret").is_none(), "public clients get no secret");
    assert_eq!(body["redirect_uris"], json!([REDIRECT_URI]));
    assert_eq!(body["grant_types"], json!(["authorization_code"]));
    assert_eq!(body["client_name"], "Public tool");

    // RFC 7591 §2: without a method the client is confidential (client_secret_basic).
    let confidential = register(&app, json!({"redirect_uris": ["https://tool.example/oauth/cb"]})).await;
    assert_eq!(confidential.status(), 201);
    let body: Value = confidential.json().await.unwrap();
    assert_eq!(body["token_endpoint_auth_method"], "client_secret_basic");
    assert!(body["client_secret"].as_str().is_some_and(|s| s.len() >= 43));
    assert_eq!(body["client_secret_expires_at"], 0);
    let stored =
        app.state.core.store.oauth_clients().by_id(body["client_id"].as_str().unwrap()).await.unwrap().unwrap();
    assert_ne!(stored.client_secret_hash.as_deref(), body["client_secret"].as_str(), "only a hash is stored");

    for (metadata, expected) in [
        (json!({"redirect_uris": ["http://evil.example/cb"]}), "invalid_redirect_uri"),
        (json!({"redirect_uris": ["https://tool.example/cb#fragment"]}), "invalid_redirect_uri"),
        (json!({"redirect_uris": []}), "invalid_redirect_uri"),
        (json!({"redirect_uris": [REDIRECT_URI], "grant_types": ["implicit"]}), "invalid_client_metadata"),
        (json!({"redirect_uris": [REDIRECT_URI], "response_types": ["token"]}), "invalid_client_metadata"),
        (json!({"redirect_uris": [REDIRECT_URI], "client_name": "x".repeat(500)}), "invalid_client_metadata"),
        (
            json!({"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "private_key_jwt"}),
            "invalid_client_metadata",
        ),
        (json!(["not", "an", "object"]), "invalid_client_metadata"),
    ] {
        let response = register(&app, metadata.clone()).await;
        assert_eq!(oauth_error(response).await, (400, expected.to_owned()), "{metadata}");
    }
    let not_json = app.http().post(app.url("/register")).body("redirect_uris=x").send().await.unwrap();
    assert_eq!(oauth_error(not_json).await, (400, "invalid_client_metadata".to_owned()));
    let huge = json!({"redirect_uris": [REDIRECT_URI], "padding": "x".repeat(20 * 1024)});
    assert_eq!(register(&app, huge).await.status(), 413, "bodies are capped at 16 KiB");
    app.stop().await;
}

#[tokio::test]
async fn registration_is_rate_limited_per_address() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    // Earlier attempts from this address count too; keep registering until refused.
    let mut refused = None;
    for _ in 0..=oauth_broker::authorization_server::registration::MAX_PER_WINDOW {
        let response = register(&app, json!({"redirect_uris": [REDIRECT_URI]})).await;
        if response.status() == 429 {
            refused = Some(response);
            break;
        }
        assert_eq!(response.status(), 201);
    }
    let refused = refused.expect("the limit is reached");
    assert!(refused.headers().get("retry-after").is_some());
    app.clock.advance(oauth_broker::authorization_server::registration::WINDOW_SECONDS);
    assert_eq!(register(&app, json!({"redirect_uris": [REDIRECT_URI]})).await.status(), 201);
    app.stop().await;
}

async fn full_flow(app: &TestApp) {
    // Register, then open /authorize without a browser session: sign-in first.
    let client_id = register_public_client(app, "Flow Tool").await;
    let (verifier, challenge) = new_pkce();
    let browser = app.browser();
    let url = authorize_url(app, &authorize_params(app, &client_id, &challenge));
    let first = browser.get(&url).send().await.unwrap();
    assert_eq!(first.status(), 303);
    assert!(location(&first).starts_with("/login?next=/authorize%3F"), "{}", location(&first));
    let html = consent_page(app, &browser, &url).await;
    for shown in ["Flow Tool", client_id.as_str(), "127.0.0.1:33418", REDIRECT_URI, ALICE] {
        assert!(html.contains(shown), "the consent page shows {shown}");
    }
    let params = callback_params(&submit_consent(app, &browser, &html, "approve", |_| {}).await);
    assert_eq!((params["state"].as_str(), params["iss"].as_str()), (STATE, app.address.as_str()));

    // Exchange the code.
    let response = exchange(app, &client_id, &params["code"], &verifier).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["cache-control"], "no-store");
    let tokens: Value = response.json().await.unwrap();
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["expires_in"], 3600);
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let refresh_1 = tokens["refresh_token"].as_str().unwrap().to_owned();
    let claims = jwt_claims(&access);
    let alice = app.state.core.store.users().by_username(ALICE).await.unwrap().unwrap();
    assert_eq!(claims["iss"], app.address);
    assert_eq!(claims["aud"], app.mcp_url(), "RFC 8707: the audience is the MCP endpoint");
    assert_eq!(claims["sub"], alice.subject);
    assert_eq!(claims["client_id"], client_id);
    assert_eq!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(), 3600);
    let grant_id = claims["grant_id"].as_str().unwrap().to_owned();

    // The access token opens /mcp for alice through the existing bearer check.
    let client = app.mcp_client_with_token(&access, ClientKind::Url).await.expect("/mcp accepts the token");
    let tools = client.peer().list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "list_connections"));
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("authorization", format!("Bearer {access}").parse().unwrap());
    let user = oauth_broker::identity::bearer::authenticate(&app.state.identity, &headers).await.unwrap();
    assert_eq!(user.client, ClientIdentity::OAuthClient(client_id.clone()), "the token names its client");

    // Consent per client: Alice's connection, made through another client, asks before this
    // client may use it, and the page names the client as it registered.
    let other = app.connected_client(ALICE).await;
    other.close().await;
    let me = serde_json::json!({"provider": "demo", "method": "GET", "path": "/me"});
    let error = match client.call("provider_request", me).await {
        Err(rmcp::ServiceError::McpError(e)) => e,
        other => panic!("expected -32042, got {other:?}"),
    };
    let link = error.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned();
    let page = app.allow_in_browser(&browser, &link, ALICE).await;
    let named = format!(
        "<strong>Flow Tool</strong> <span class=\"muted\">(name chosen by the app itself; client id {client_id})</span>"
    );
    assert!(page.contains(&named), "{page}");
    client.close().await;

    // Refresh rotates: a new pair, and the old refresh token is retired.
    let response = refresh(app, &client_id, &refresh_1).await;
    assert_eq!(response.status(), 200);
    let rotated: Value = response.json().await.unwrap();
    let refresh_2 = rotated["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(refresh_2, refresh_1);
    assert_eq!(jwt_claims(rotated["access_token"].as_str().unwrap())["aud"], app.mcp_url());

    // Replaying the retired token fails and kills the family: the current one dies too.
    assert_eq!(oauth_error(refresh(app, &client_id, &refresh_1).await).await, (400, "invalid_grant".into()));
    assert_eq!(oauth_error(refresh(app, &client_id, &refresh_2).await).await, (400, "invalid_grant".into()));
    assert!(!app.state.core.store.oauth_grants().is_active(&grant_id).await.unwrap());
}
on_both_backends!(register_authorize_exchange_use_and_rotate, full_flow);

/// The connections page lists the MCP clients signed in through the authorization server;
/// signing one out ends its access and refresh tokens and its consents to use connections.
async fn signing_an_app_out_ends_its_tokens_and_consents(app: &TestApp) {
    let client_id = register_public_client(app, "Flow Tool").await;
    let (verifier, challenge) = new_pkce();
    let code = authorize_code(app, &client_id, &challenge).await;
    let tokens: Value = exchange(app, &client_id, &code, &verifier).await.json().await.unwrap();
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let refresh_1 = tokens["refresh_token"].as_str().unwrap().to_owned();
    let grant_id = jwt_claims(&access)["grant_id"].as_str().unwrap().to_owned();
    // The app is allowed to use Alice's connection (it connected it).
    let other = app.connected_client(ALICE).await;
    other.close().await;
    let client = app.mcp_client_with_token(&access, ClientKind::Url).await.unwrap();
    let me = serde_json::json!({"provider": "demo", "method": "GET", "path": "/me"});
    let link = match client.call("provider_request", me).await {
        Err(rmcp::ServiceError::McpError(e)) => e.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned(),
        other => panic!("expected -32042, got {other:?}"),
    };
    let browser = app.browser();
    app.allow_in_browser(&browser, &link, ALICE).await;
    client.close().await;
    // Approving this client id again would hand that connection over at once: the page says so.
    let (_, challenge) = new_pkce();
    let again = consent_page(app, &browser, &authorize_url(app, &authorize_params(app, &client_id, &challenge))).await;
    assert!(again.contains("Connections it may use at once") && again.contains("Demo Provider (demo-user)"), "{again}");

    let page = browser.get(app.url("/connections")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("Apps signed in to the broker") && page.contains("Flow Tool"), "{page}");
    let csrf = crate::helpers::hidden_field(&page, "csrf_token").unwrap();
    let sign_out = |browser: &reqwest::Client, csrf: String, client: String| {
        let request =
            browser.post(app.url("/connections/apps/revoke")).form(&[("csrf_token", csrf), ("client_id", client)]);
        async move { request.send().await.unwrap().status() }
    };
    let bob = app.browser();
    app.sign_in(&bob, crate::helpers::BOB, "/").await;
    let bob_page = bob.get(app.url("/connections")).send().await.unwrap().text().await.unwrap();
    assert!(!bob_page.contains("Flow Tool"), "Bob sees only his own apps");
    let bob_csrf = crate::helpers::hidden_field(&bob_page, "csrf_token").unwrap();
    assert_eq!(sign_out(&bob, bob_csrf, client_id.clone()).await, 404, "Bob cannot sign Alice's app out");
    assert_eq!(sign_out(&browser, "forged".into(), client_id.clone()).await, 403);
    assert!(app.state.core.store.oauth_grants().is_active(&grant_id).await.unwrap());
    let alice_id = app.user_id(ALICE).await;
    let client_key = format!("client:{client_id}");
    let consents = app.state.core.store.consents().for_user(&alice_id).await.unwrap();
    assert!(consents.iter().any(|c| c.client_key == client_key));
    assert_eq!(sign_out(&browser, csrf, client_id.clone()).await, 303);
    assert!(!app.state.core.store.oauth_grants().is_active(&grant_id).await.unwrap());
    let consents = app.state.core.store.consents().for_user(&alice_id).await.unwrap();
    assert!(!consents.iter().any(|c| c.client_key == client_key), "its consents went with it");
    assert!(app.mcp_client_with_token(&access, ClientKind::Url).await.is_err(), "its access token stopped working");
    assert_eq!(oauth_error(refresh(app, &client_id, &refresh_1).await).await, (400, "invalid_grant".into()));
}
on_both_backends!(sign_an_app_out, signing_an_app_out_ends_its_tokens_and_consents);

#[tokio::test]
async fn rmcps_oauth_client_discovers_registers_authorizes_and_calls_mcp() {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::auth::{AuthClient, AuthorizationRequest, OAuthState};
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let app = spawn_app(Backend::Sqlite).await.unwrap();
    // Discovery (PRM → RFC 8414) and dynamic registration, as any MCP client does them.
    let mut oauth = OAuthState::new(app.mcp_url(), None).await.unwrap();
    oauth
        .start_authorization(AuthorizationRequest::new(REDIRECT_URI).with_client_name("rmcp OAuth client"))
        .await
        .unwrap();
    let authorize = oauth.get_authorization_url().await.unwrap();
    assert!(authorize.starts_with(&app.url("/authorize?")), "{authorize}");

    // The headless browser: sign in, approve, hand the callback URL back to rmcp.
    let browser = app.browser();
    let html = consent_page(&app, &browser, &authorize).await;
    assert!(html.contains("rmcp OAuth client"));
    let callback = location(&submit_consent(&app, &browser, &html, "approve", |_| {}).await);
    oauth.handle_callback_url(&callback).await.unwrap();

    let manager = oauth.into_authorization_manager().expect("authorized");
    let access = manager.get_access_token().await.unwrap();
    assert_eq!(jwt_claims(&access)["aud"], app.mcp_url());
    let transport = StreamableHttpClientTransport::with_client(
        AuthClient::new(reqwest::Client::default(), manager),
        StreamableHttpClientTransportConfig::with_uri(app.mcp_url()),
    );
    let service = ().serve(transport).await.expect("rmcp connects with the token it obtained");
    let tools = service.peer().list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "provider_request"));
    let _ = service.cancel().await;
    app.stop().await;
}

#[tokio::test]
async fn an_unknown_client_or_unregistered_redirect_uri_gets_a_page_never_a_redirect() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client_id = register_public_client(&app, "Tool").await;
    let (_, challenge) = new_pkce();
    let good = authorize_params(&app, &client_id, &challenge);
    for params in [
        with(good.clone(), "redirect_uri", Some("http://127.0.0.1:33418/other")),
        with(good.clone(), "redirect_uri", Some("http://127.0.0.1:33418/callback/")),
        with(good.clone(), "redirect_uri", Some("https://evil.example/callback")),
        with(good.clone(), "redirect_uri", None),
        with(good.clone(), "client_id", Some("no-such-client")),
        with(good.clone(), "client_id", None),
    ] {
        let response = app.browser().get(authorize_url(&app, &params)).send().await.unwrap();
        assert_eq!(response.status(), 400, "{params:?}");
        assert!(response.headers().get("location").is_none(), "never redirected: {params:?}");
    }
    app.stop().await;
}

/// GET /authorize with `params` (no session needed: these fail before sign-in) → callback query.
async fn authorize_error(app: &TestApp, params: &[(String, String)]) -> HashMap<String, String> {
    let response = app.browser().get(authorize_url(app, params)).send().await.unwrap();
    let query = callback_params(&response);
    assert_eq!(query["state"], STATE);
    assert_eq!(query["iss"], app.address);
    query
}

#[tokio::test]
async fn pkce_s256_and_the_mcp_resource_are_required() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client_id = register_public_client(&app, "Tool").await;
    let (_, challenge) = new_pkce();
    let good = authorize_params(&app, &client_id, &challenge);
    for (params, expected) in [
        (with(good.clone(), "code_challenge_method", None), "invalid_request"),
        (with(good.clone(), "code_challenge_method", Some("plain")), "invalid_request"),
        (with(good.clone(), "code_challenge", None), "invalid_request"),
        (with(good.clone(), "code_challenge", Some("too-short")), "invalid_request"),
        (with(good.clone(), "response_type", Some("token")), "unsupported_response_type"),
        (with(good.clone(), "resource", Some("https://other.example/mcp")), "invalid_target"),
        (with(good.clone(), "resource", Some(&format!("{}/", app.mcp_url()))), "invalid_target"),
        (with(good.clone(), "scope", Some("admin")), "invalid_scope"),
    ] {
        assert_eq!(authorize_error(&app, &params).await["error"], expected, "{params:?}");
    }
    app.stop().await;
}

#[tokio::test]
async fn the_token_endpoint_refuses_a_wrong_verifier_redirect_uri_resource_or_client() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client_id = register_public_client(&app, "Tool").await;
    let other_client = register_public_client(&app, "Other").await;
    let (verifier, challenge) = new_pkce();
    let code = authorize_code(&app, &client_id, &challenge).await;
    let (wrong_verifier, _) = new_pkce();
    let base: Vec<(String, String)> = [
        ("grant_type", "authorization_code"),
        ("client_id", client_id.as_str()),
        ("code", code.as_str()),
        ("redirect_uri", REDIRECT_URI),
        ("code_verifier", verifier.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let changed = |key: &str, value: &str| with(base.clone(), key, Some(value));
    for (form, expected) in [
        (changed("code_verifier", &wrong_verifier), (400, "invalid_grant")),
        (changed("redirect_uri", "http://127.0.0.1:33418/other"), (400, "invalid_grant")),
        (changed("client_id", &other_client), (400, "invalid_grant")),
        (changed("client_id", "no-such-client"), (401, "invalid_client")),
        (changed("grant_type", "password"), (400, "unsupported_grant_type")),
        (changed("resource", "https://other.example/mcp"), (400, "invalid_target")),
    ] {
        let response = token_request(&app, &form).await;
        assert_eq!(oauth_error(response).await, (expected.0, expected.1.to_owned()), "{form:?}");
    }
    // None of those consumed the code: the rightful request still works.
    let ok = token_request(&app, &changed("resource", &app.mcp_url())).await;
    assert_eq!(ok.status(), 200);
    app.stop().await;
}

async fn code_reuse(app: &TestApp) {
    let client_id = register_public_client(app, "Tool").await;
    let (verifier, challenge) = new_pkce();
    let code = authorize_code(app, &client_id, &challenge).await;
    let first: Value = exchange(app, &client_id, &code, &verifier).await.json().await.unwrap();
    let refresh_token = first["refresh_token"].as_str().unwrap().to_owned();

    let replay = exchange(app, &client_id, &code, &verifier).await;
    assert_eq!(oauth_error(replay).await, (400, "invalid_grant".into()));
    // RFC 6749 §4.1.2: what the code issued is revoked.
    assert_eq!(oauth_error(refresh(app, &client_id, &refresh_token).await).await, (400, "invalid_grant".into()));
    let grant_id = jwt_claims(first["access_token"].as_str().unwrap())["grant_id"].as_str().unwrap().to_owned();
    assert!(!app.state.core.store.oauth_grants().is_active(&grant_id).await.unwrap());
    // The access token already issued stops working on /mcp at once, not at its expiry.
    let refused =
        app.mcp_client_with_token(first["access_token"].as_str().unwrap(), crate::helpers::ClientKind::Url).await;
    assert!(refused.is_err(), "a revoked grant's access token must be refused");
}
on_both_backends!(a_reused_code_fails_and_revokes_its_tokens, code_reuse);

#[tokio::test]
async fn a_code_expires_after_60_seconds() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client_id = register_public_client(&app, "Tool").await;
    let (verifier, challenge) = new_pkce();
    let code = authorize_code(&app, &client_id, &challenge).await;
    app.clock.advance(61);
    assert_eq!(oauth_error(exchange(&app, &client_id, &code, &verifier).await).await, (400, "invalid_grant".into()));
    app.stop().await;
}

#[tokio::test]
async fn the_consent_form_needs_the_sessions_csrf_token_and_is_revalidated() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client_id = register_public_client(&app, "Tool").await;
    let (_, challenge) = new_pkce();
    let browser = app.browser();
    let html =
        consent_page(&app, &browser, &authorize_url(&app, &authorize_params(&app, &client_id, &challenge))).await;

    let without = submit_consent(&app, &browser, &html, "approve", |f| f.retain(|(k, _)| k != "csrf_token")).await;
    assert_eq!(without.status(), 403);
    assert!(without.headers().get("location").is_none());
    let forged = submit_consent(&app, &browser, &html, "approve", |f| {
        f.retain(|(k, _)| k != "csrf_token");
        f.push(("csrf_token".into(), "forged-token-forged-token-forged-token-xxxx".into()));
    })
    .await;
    assert_eq!(forged.status(), 403);
    assert!(forged.headers().get("location").is_none());
    // A hidden field edited to another redirect URI is checked again: a page, no redirect.
    let tampered = submit_consent(&app, &browser, &html, "approve", |f| {
        f.retain(|(k, _)| k != "redirect_uri");
        f.push(("redirect_uri".into(), "https://evil.example/cb".into()));
    })
    .await;
    assert_eq!(tampered.status(), 400);
    assert!(tampered.headers().get("location").is_none());
    // Another browser (no session) posting the same form is sent to sign in, not approved.
    let stranger = submit_consent(&app, &app.browser(), &html, "approve", |_| {}).await;
    assert_eq!(stranger.status(), 303);
    assert!(location(&stranger).starts_with("/login?next="));

    let denied = callback_params(&submit_consent(&app, &browser, &html, "deny", |_| {}).await);
    assert_eq!(denied["error"], "access_denied");
    assert_eq!((denied["state"].as_str(), denied["iss"].as_str()), (STATE, app.address.as_str()));
    assert!(!denied.contains_key("code"));
    let approved = callback_params(&submit_consent(&app, &browser, &html, "approve", |_| {}).await);
    assert!(approved.contains_key("code"));
    app.stop().await;
}

#[tokio::test]
async fn confidential_clients_authenticate_with_their_registered_method_only() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let registered: Value = register(&app, json!({"redirect_uris": [REDIRECT_URI], "client_name": "Server tool"}))
        .await
        .json()
        .await
        .unwrap();
    let client_id = registered["client_id"].as_str().unwrap();
    let secret = registered["client_secret"].as_str().unwrap();
    let (verifier, challenge) = new_pkce();
    let code = authorize_code(&app, client_id, &challenge).await;
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", REDIRECT_URI),
        ("code_verifier", verifier.as_str()),
    ];
    let post = |extra: Vec<(&'static str, String)>, basic: Option<(&str, &str)>| {
        let mut body: Vec<(String, String)> = form.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        body.extend(extra.into_iter().map(|(k, v)| (k.to_owned(), v)));
        let mut request = app.http().post(app.url("/token")).form(&body);
        if let Some((id, secret)) = basic {
            request = request.basic_auth(id, Some(secret));
        }
        request.send()
    };
    let id = client_id.to_owned();
    let no_secret = post(vec![("client_id", id.clone())], None).await.unwrap();
    assert_eq!(oauth_error(no_secret).await, (401, "invalid_client".into()));
    let wrong = post(vec![], Some((client_id, "wrong-secret"))).await.unwrap();
    assert_eq!(wrong.headers()["www-authenticate"], "Basic realm=\"oauth-broker\"");
    assert_eq!(oauth_error(wrong).await, (401, "invalid_client".into()));
    let other_method = post(vec![("client_id", id.clone()), ("client_secret", secret.to_owned())], None).await.unwrap();
    assert_eq!(oauth_error(other_method).await, (401, "invalid_client".into()), "registered for Basic, not POST");
    let ok = post(vec![], Some((client_id, secret))).await.unwrap();
    assert_eq!(ok.status(), 200);
    let tokens: Value = ok.json().await.unwrap();
    assert!(tokens.get("refresh_token").is_none(), "the client did not register the refresh_token grant");
    app.stop().await;
}

/// Serves client metadata documents over plain http on loopback (allowed for this port only).
async fn serve_documents() -> String {
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let doc = |client_id: String| {
        json!({"client_id": client_id, "client_name": "Document Tool", "redirect_uris": [REDIRECT_URI],
               "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": "none"})
    };
    let good = doc(format!("{base}/client.json"));
    let wrong = doc("https://someone-else.example/client.json".to_owned());
    let router = axum::Router::new()
        .route("/client.json", get(move || async move { axum::Json(good) }))
        .route("/wrong.json", get(move || async move { axum::Json(wrong) }))
        .route("/moved.json", get(|| async { axum::response::Redirect::temporary("/client.json") }));
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    client_metadata_document::testing::allow_plain_http_on_loopback_port(port);
    base
}

#[tokio::test]
async fn a_client_with_a_metadata_document_connects_without_registering() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let base = serve_documents().await;
    let client_id = format!("{base}/client.json");
    let (verifier, challenge) = new_pkce();
    let browser = app.browser();
    let url = authorize_url(&app, &authorize_params(&app, &client_id, &challenge));
    let html = consent_page(&app, &browser, &url).await;
    assert!(html.contains("Document Tool"));
    assert!(html.contains(&format!("Described by <code>{}</code>", base.trim_start_matches("http://"))));
    let params = callback_params(&submit_consent(&app, &browser, &html, "approve", |_| {}).await);
    let response = exchange(&app, &client_id, &params["code"], &verifier).await;
    assert_eq!(response.status(), 200);
    let tokens: Value = response.json().await.unwrap();
    assert_eq!(jwt_claims(tokens["access_token"].as_str().unwrap())["client_id"], client_id);
    let refreshed = refresh(&app, &client_id, tokens["refresh_token"].as_str().unwrap()).await;
    assert_eq!(refreshed.status(), 200);

    // A document naming another client_id, or a redirect to one, is refused with a page.
    for path in ["/wrong.json", "/moved.json"] {
        let params = authorize_params(&app, &format!("{base}{path}"), &challenge);
        let response = app.browser().get(authorize_url(&app, &params)).send().await.unwrap();
        assert_eq!(response.status(), 400, "{path}");
        assert!(response.headers().get("location").is_none());
    }
    // Without the test allowance, plain-http loopback client IDs are not documents at all.
    let params = authorize_params(&app, "http://127.0.0.1:1/client.json", &challenge);
    let response = app.browser().get(authorize_url(&app, &params)).send().await.unwrap();
    assert_eq!(response.status(), 400);
    app.stop().await;
}

/// Tokens for a fresh public client as alice: (client_id, access token, refresh token).
async fn tokens_for_new_client(app: &TestApp, name: &str) -> (String, String, String) {
    let client_id = register_public_client(app, name).await;
    let (verifier, challenge) = new_pkce();
    let code = authorize_code(app, &client_id, &challenge).await;
    let tokens: Value = exchange(app, &client_id, &code, &verifier).await.json().await.unwrap();
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    (client_id, access, tokens["refresh_token"].as_str().unwrap().to_owned())
}

async fn revoke(app: &TestApp, form: &[(&str, &str)]) -> reqwest::Response {
    app.http().post(app.url("/revoke")).form(form).send().await.unwrap()
}

// RFC 7009.
async fn a_client_revokes_its_own_tokens_and_nobody_elses(app: &TestApp) {
    let (client_a, access_a, refresh_a) = tokens_for_new_client(app, "Tool A").await;
    let (client_b, access_b, refresh_b) = tokens_for_new_client(app, "Tool B").await;
    let grant_of = |token: &str| jwt_claims(token)["grant_id"].as_str().unwrap().to_owned();
    let active = |grant: String| async move { app.state.core.store.oauth_grants().is_active(&grant).await.unwrap() };

    // Without client authentication: 401, nothing revoked.
    let anonymous = app.http().post(app.url("/revoke")).form(&[("token", refresh_a.as_str())]).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    // Client B presenting A's tokens: answered like an unknown token, and A keeps them.
    for token in [&refresh_a, &access_a] {
        assert_eq!(revoke(app, &[("client_id", &client_b), ("token", token)]).await.status(), 200);
    }
    assert!(active(grant_of(&access_a)).await);
    // Unknown or malformed tokens, and a missing one.
    assert_eq!(revoke(app, &[("client_id", &client_a), ("token", "no-such-token")]).await.status(), 200);
    assert_eq!(oauth_error(revoke(app, &[("client_id", &client_a)]).await).await, (400, "invalid_request".into()));

    // A revokes with its refresh token: the whole grant ends, its access token included.
    let revoked =
        revoke(app, &[("client_id", &client_a), ("token", &refresh_a), ("token_type_hint", "refresh_token")]).await;
    assert_eq!(revoked.status(), 200);
    assert!(!active(grant_of(&access_a)).await);
    assert!(app.mcp_client_with_token(&access_a, ClientKind::Url).await.is_err());
    assert_eq!(oauth_error(refresh(app, &client_a, &refresh_a).await).await, (400, "invalid_grant".into()));

    // B revokes with its access token (the hint is only a hint).
    let revoked =
        revoke(app, &[("client_id", &client_b), ("token", &access_b), ("token_type_hint", "refresh_token")]).await;
    assert_eq!(revoked.status(), 200);
    assert!(!active(grant_of(&access_b)).await);
    assert_eq!(oauth_error(refresh(app, &client_b, &refresh_b).await).await, (400, "invalid_grant".into()));
    // Revoking again is still a success.
    assert_eq!(revoke(app, &[("client_id", &client_b), ("token", &refresh_b)]).await.status(), 200);
}
on_both_backends!(revocation_endpoint, a_client_revokes_its_own_tokens_and_nobody_elses);

async fn register_tool_server(app: &TestApp) -> crate::helpers::token_api::ServiceCredentials {
    let options = crate::helpers::token_api::ServiceOptions { resource: Some(TOOL_SERVER), ..Default::default() };
    crate::helpers::token_api::register_service(app, "notes", &["demo"], options).await
}

// RFC 7009 §2.1: an access token for a tool server is as much the client's as one for /mcp.
#[tokio::test]
async fn a_client_revokes_its_grant_with_an_access_token_meant_for_a_tool_server() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    register_tool_server(&app).await;
    let client_id = register_public_client(&app, "Tool Client").await;
    let (access, refresh_token) = tool_server_tokens(&app, &client_id).await;
    let grant = jwt_claims(&access)["grant_id"].as_str().unwrap().to_owned();

    let revoked = revoke(&app, &[("client_id", &client_id), ("token", &access)]).await;

    assert_eq!(revoked.status(), 200);
    assert!(
        !app.state.core.store.oauth_grants().is_active(&grant).await.unwrap(),
        "the grant ends with its access token"
    );
    assert_eq!(oauth_error(refresh(&app, &client_id, &refresh_token).await).await, (400, "invalid_grant".into()));
    app.stop().await;
}

// MCP security best practices §Confused deputy: a token for a tool server opens what that tool
// server may already use, and the consent page must say so before the user approves.
#[tokio::test]
async fn the_consent_page_for_a_tool_server_names_the_connections_that_tool_server_may_already_use() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let service = register_tool_server(&app).await;
    // Alice let the tool server use her demo connection (through the token API).
    let subject = crate::helpers::token_api::user_token_for(&app, ALICE, TOOL_SERVER).await;
    let ask = || {
        app.http()
            .post(app.url("/v1/tokens"))
            .basic_auth(&service.client_id, Some(&service.secret))
            .json(&json!({"subject_token": subject, "provider": "demo"}))
            .send()
    };
    let problem: Value = ask().await.unwrap().json().await.unwrap();
    app.approve_in_browser(&app.browser(), problem["authorization"]["url"].as_str().unwrap(), ALICE).await;
    assert_eq!(ask().await.unwrap().status(), 200, "the tool server may use the connection");

    // A new client asks for a token for that tool server.
    let client_id = register_public_client(&app, "Brand New Client").await;
    let (_, challenge) = new_pkce();
    let url = authorize_url(&app, &with(authorize_params(&app, &client_id, &challenge), "resource", Some(TOOL_SERVER)));
    let html = consent_page(&app, &app.browser(), &url).await;

    assert!(html.contains("notes (a tool server an operator registered)"), "{html}");
    assert!(
        html.contains("Connections it may use at once") && html.contains("Demo Provider (demo-user)"),
        "approving hands over what the tool server may use: {html}"
    );
    app.stop().await;
}
