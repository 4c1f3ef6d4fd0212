//! Bearer authentication on /mcp: only tokens the broker issued for this endpoint, unexpired,
//! naming a known user, get in. Each failure is tried with a hand-made token.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::pkcs8::EncodePrivateKey;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

use crate::helpers::{ALICE, Backend, TestApp, spawn_app};

fn initialize() -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
}

async fn post_mcp(app: &TestApp, token: Option<&str>) -> reqwest::Response {
    let mut request =
        app.http().post(app.mcp_url()).header("accept", "application/json, text/event-stream").json(&initialize());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap()
}

fn claims(app: &TestApp, subject: &str) -> serde_json::Value {
    let now = app.now();
    json!({"iss": app.address, "sub": subject, "aud": app.mcp_url(), "exp": now + 600, "iat": now, "jti": "t"})
}

fn active_kid(app: &TestApp) -> String {
    app.state.identity.keys.jwks()["keys"][0]["kid"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_request_without_a_token_gets_401_with_the_resource_metadata_challenge() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let response = post_mcp(&app, None).await;
    assert_eq!(response.status(), 401);
    let challenge = response.headers()["www-authenticate"].to_str().unwrap().to_owned();
    let metadata_url = app.url("/.well-known/oauth-protected-resource/mcp");
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")), "{challenge}");

    for path in ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"] {
        let metadata: serde_json::Value = app.http().get(app.url(path)).send().await.unwrap().json().await.unwrap();
        assert_eq!(metadata["resource"], app.mcp_url(), "RFC 9728 §3.3: resource is exactly the MCP URL");
        assert_eq!(metadata["authorization_servers"][0], app.address);
    }
    app.stop().await;
}

#[tokio::test]
async fn forged_expired_and_misdirected_tokens_are_all_rejected_with_invalid_token() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let alice = app.state.core.store.users().by_username(ALICE).await.unwrap().unwrap();
    let kid = active_kid(&app);
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid.clone());

    // Signed by a key that is not ours, under our kid.
    let foreign = ed25519_dalek::SigningKey::from_bytes(&[42u8; 32]);
    let foreign_key = EncodingKey::from_ed_der(foreign.to_pkcs8_der().unwrap().as_bytes());
    let wrong_key = jsonwebtoken::encode(&header, &claims(&app, &alice.subject), &foreign_key).unwrap();

    // alg "none".
    let body = URL_SAFE_NO_PAD.encode(claims(&app, &alice.subject).to_string());
    let none =
        format!("{}.{body}.", URL_SAFE_NO_PAD.encode(json!({"alg": "none", "typ": "JWT", "kid": kid}).to_string()));

    // HS256 keyed with our public key (the classic algorithm-confusion attack).
    let x = app.state.identity.keys.jwks()["keys"][0]["x"].as_str().unwrap().to_owned();
    let public = URL_SAFE_NO_PAD.decode(x).unwrap();
    let mut hs_header = Header::new(Algorithm::HS256);
    hs_header.kid = Some(kid.clone());
    let confused =
        jsonwebtoken::encode(&hs_header, &claims(&app, &alice.subject), &EncodingKey::from_secret(&public)).unwrap();

    // Properly signed, but expired beyond the leeway, or naming an unknown user.
    let real = app.state.identity.keys.issue(&alice.subject, None, app.now() - 3600, 600).unwrap();
    let unknown_user = app.state.identity.keys.issue("no-such-user", None, app.now(), 600).unwrap();

    for (what, token) in [
        ("foreign key", wrong_key.as_str()),
        ("alg none", none.as_str()),
        ("HS256 with the public key", confused.as_str()),
        ("expired an hour ago", real.as_str()),
        ("unknown subject", unknown_user.as_str()),
        ("garbage", "not-a-jwt"),
    ] {
        let response = post_mcp(&app, Some(token)).await;
        assert_eq!(response.status(), 401, "{what}");
        let challenge = response.headers()["www-authenticate"].to_str().unwrap().to_owned();
        assert!(challenge.contains("error=\"invalid_token\""), "{what}: {challenge}");
    }
    app.stop().await;
}

#[tokio::test]
async fn tokens_for_another_audience_or_issuer_are_rejected() {
    // A second broker (other URL, other key) issues a token; ours must refuse it.
    let ours = spawn_app(Backend::Sqlite).await.unwrap();
    let theirs = spawn_app(Backend::Sqlite).await.unwrap();
    let token = theirs.token_for(ALICE).await;
    assert_eq!(post_mcp(&ours, Some(&token)).await.status(), 401);
    // The genuine token works.
    let good = ours.token_for(ALICE).await;
    assert_eq!(post_mcp(&ours, Some(&good)).await.status(), 200);
    ours.stop().await;
    theirs.stop().await;
}

#[tokio::test]
async fn a_foreign_origin_is_refused_even_with_a_valid_token() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let token = app.token_for(ALICE).await;
    let response = app
        .http()
        .post(app.mcp_url())
        .bearer_auth(&token)
        .header("accept", "application/json, text/event-stream")
        .header("origin", "https://evil.example")
        .json(&initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let same_origin = app
        .http()
        .post(app.mcp_url())
        .bearer_auth(&token)
        .header("accept", "application/json, text/event-stream")
        .header("origin", &app.address)
        .json(&initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(same_origin.status(), 200);
    app.stop().await;
}
