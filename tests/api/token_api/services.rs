//! `admin services …` run as the real binary against a running app's database (SQLite and
//! PostgreSQL), and what the app then makes of the credentials it printed
//! (`oauth_broker::api::authenticated_service::authenticate_service`).

use std::process::{Command, Output};

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use base64::Engine;
use oauth_broker::api::authenticated_service::authenticate_service;
use oauth_broker::crypto::sha256_hex;
use oauth_broker::domain::Scopes;
use oauth_broker::store::grants::SealedTokens;
use oauth_broker::store::token_api::ServiceRow;
use secrecy::ExposeSecret;
use serde_json::Value;

use crate::helpers::{ALICE, TestApp, urlencode};
use crate::on_both_backends;
use oauth_broker::store::grants::{Grants, NewGrant};

/// The binary, pointed at `app`'s database and key, with the demo provider configured.
fn admin(app: &TestApp, args: &[&str]) -> Output {
    let config = &app.state.core.config;
    let mut command = Command::new(crate::helpers::binary());
    command.env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
    command
        .env("OAUTH_BROKER_DATA_DIR", &config.data_dir)
        .env("OAUTH_BROKER_PUBLIC_URL", config.public_url.as_str())
        .env("OAUTH_BROKER_DATABASE_URL", &config.database_url)
        .env("OAUTH_BROKER_ENCRYPTION_KEY", config.encryption_key.as_ref().unwrap().expose_secret())
        .env("OAUTH_BROKER_DEMO", "true")
        .arg("admin")
        .args(args);
    command.output().unwrap()
}

fn succeeded(output: &Output) -> Value {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn refused(output: &Output, message: &str) {
    assert!(!output.status.success(), "should fail: {}", String::from_utf8_lossy(&output.stdout));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(message), "expected {message:?} in {stderr}");
}

/// `Authorization: Basic …` as RFC 6749 §2.3.1 builds it.
fn basic(client_id: &str, secret: &str) -> HeaderMap {
    let raw = format!("{}:{}", urlencode(client_id), urlencode(secret));
    let mut headers = HeaderMap::new();
    let value = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(raw));
    headers.insert(AUTHORIZATION, value.parse().unwrap());
    headers
}

async fn authenticates(app: &TestApp, client_id: &str, secret: &str) -> ServiceRow {
    authenticate_service(&app.state, &basic(client_id, secret), "192.0.2.1").await.unwrap()
}

/// The one answer for every failed service authentication.
async fn is_invalid_client(app: &TestApp, headers: &HeaderMap) {
    let problem = authenticate_service(&app.state, headers, "192.0.2.1").await.unwrap_err();
    assert_eq!((problem.status.as_u16(), problem.code), (401, "invalid_client"));
}

async fn a_service_is_added_listed_rotated_and_authenticates(app: &TestApp) {
    // Arrange / Act: register a service.
    let added = admin(
        app,
        &[
            "services",
            "add",
            "notes",
            "--providers",
            "demo",
            "--resource",
            "http://127.0.0.1:9/mcp",
            "--proxy-only",
            "--json",
        ],
    );
    let credentials = succeeded(&added);
    assert!(!String::from_utf8_lossy(&added.stderr).contains("obs_"), "the secret is not logged");
    let client_id = credentials["client_id"].as_str().unwrap().to_owned();
    let secret = credentials["client_secret"].as_str().unwrap().to_owned();
    assert_eq!(client_id, "svc_notes");
    assert!(secret.starts_with("obs_") && secret.len() == 4 + 43, "{secret}");
    assert_eq!(credentials["providers"], serde_json::json!(["demo"]));
    assert_eq!(credentials["proxy_only"], true);
    assert_eq!(credentials["trusted"], false);

    // The listing shows the service, never its secret or hash.
    let listed = admin(app, &["services", "list", "--json"]);
    let list = succeeded(&listed);
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["client_id"], "svc_notes");
    assert_eq!(list[0]["resource"], "http://127.0.0.1:9/mcp");
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(!text.contains(&secret) && !text.contains(&sha256_hex(&secret)) && !text.contains("secret"), "{text}");
    let plain = admin(app, &["services", "list"]);
    assert!(plain.status.success());
    let plain = String::from_utf8_lossy(&plain.stdout);
    assert!(plain.contains("svc_notes"));
    // Laid out as the other admin tables: each column starts where its header does, two spaces
    // after the widest cell before it (issue 29: PROXY_ONLY and TRUSTED ran together).
    let lines: Vec<&str> = plain.lines().collect();
    assert_eq!(lines.len(), 2, "{plain}");
    let starts = |line: &str| -> Vec<usize> {
        let bytes = line.as_bytes();
        (0..bytes.len()).filter(|&i| bytes[i] != b' ' && (i == 0 || bytes[i - 1] == b' ')).collect()
    };
    assert_eq!(starts(lines[0]), starts(lines[1]), "{plain}");
    assert!(lines[0].contains("PROXY_ONLY  TRUSTED"), "{plain}");

    // The printed credentials authenticate; a wrong secret, an unknown id and a name do not.
    let service = authenticates(app, &client_id, &secret).await;
    assert_eq!((service.name.as_str(), service.proxy_only, service.trusted), ("notes", true, false));
    is_invalid_client(app, &basic(&client_id, &format!("{secret}x"))).await;
    is_invalid_client(app, &basic("svc_other", &secret)).await;
    is_invalid_client(app, &basic("notes", &secret)).await;
    let mut malformed = HeaderMap::new();
    malformed.insert(AUTHORIZATION, format!("Bearer {secret}").parse().unwrap());
    is_invalid_client(app, &malformed).await;
    is_invalid_client(app, &HeaderMap::new()).await;

    // Rotation by the CLI, another process: the old secret stops working as soon as this
    // server's watcher sees the change (the service row is cached), the new one works.
    let rotated = succeeded(&admin(app, &["services", "rotate-secret", "notes", "--json"]));
    let new_secret = rotated["client_secret"].as_str().unwrap().to_owned();
    assert_ne!(new_secret, secret);
    crate::helpers::eventually("the old secret is refused", std::time::Duration::from_secs(5), || async {
        authenticate_service(&app.state, &basic(&client_id, &secret), "192.0.2.1").await.is_err()
    })
    .await;
    is_invalid_client(app, &basic(&client_id, &secret)).await;
    assert_eq!(authenticates(app, &client_id, &new_secret).await.id, "svc_notes");
    refused(&admin(app, &["services", "rotate-secret", "nobody"]), "no service named nobody");

    // Every change is audited, never with a secret.
    let audit = app.state.core.store.audit().entries(None, 50).await.unwrap();
    let actions: Vec<_> = audit.iter().map(|e| e.action.as_str()).collect();
    assert!(actions.contains(&"service.added") && actions.contains(&"service.secret_rotated"), "{actions:?}");
    for entry in &audit {
        let detail = entry.detail.as_deref().unwrap_or("");
        assert!(!detail.contains(&secret) && !detail.contains(&new_secret), "{detail}");
        assert!(!detail.contains(&sha256_hex(&secret)) && !detail.contains(&sha256_hex(&new_secret)), "{detail}");
    }
}

on_both_backends!(add_list_rotate_authenticate, a_service_is_added_listed_rotated_and_authenticates);

async fn bad_registrations_are_refused_and_change_nothing(app: &TestApp) {
    succeeded(&admin(app, &["services", "add", "notes", "--providers", "demo", "--json"]));
    let before = app.state.core.store.services().by_name("notes").await.unwrap().unwrap();

    refused(&admin(app, &["services", "add", "notes", "--providers", "demo"]), "already exists");
    refused(&admin(app, &["services", "add", "other", "--providers", "demo,github"]), "configured providers: demo");
    refused(&admin(app, &["services", "add", "Other", "--providers", "demo"]), "service name");
    for resource in [
        "tools.example/mcp",
        "http://tools.example/mcp",
        "https://tools.example/mcp#x",
        "https://user:pw@tools.example/",
        "ftp://tools.example/",
    ] {
        refused(
            &admin(app, &["services", "add", "other", "--providers", "demo", "--resource", resource]),
            "--resource",
        );
    }

    assert!(app.state.core.store.services().by_name("other").await.unwrap().is_none(), "nothing was created");
    assert_eq!(app.state.core.store.services().list().await.unwrap(), vec![before], "the first service is unchanged");
    let audit = app.state.core.store.audit().entries(None, 50).await.unwrap();
    assert_eq!(audit.iter().filter(|e| e.action.starts_with("service.")).count(), 1, "only the first add");
}

on_both_backends!(bad_registrations, bad_registrations_are_refused_and_change_nothing);

async fn removing_a_service_removes_its_consents_only(app: &TestApp) {
    // Arrange: a service, and alice's connection which it and another client may use.
    let credentials = succeeded(&admin(app, &["services", "add", "notes", "--providers", "demo", "--json"]));
    let secret = credentials["client_secret"].as_str().unwrap().to_owned();
    let alice = app.user_id(ALICE).await;
    let store = &app.state.core.store;
    let grant_id = Grants::id_for(&alice, "demo", "");
    let tokens = SealedTokens {
        access_token_sealed: vec![1],
        refresh_token_sealed: None,
        key_id: "k".into(),
        expires_at: None,
        scopes: Scopes::parse(["profile"]).unwrap(),
    };
    assert!(
        store
            .grants()
            .upsert(
                &NewGrant {
                    id: &grant_id,
                    user_id: &alice,
                    provider: "demo",
                    account_label: None,
                    tokens: &tokens,
                    organization: &oauth_broker::domain::OrganizationId::default_organization(),
                    app_id: None
                },
                app.now()
            )
            .await
            .unwrap()
    );
    for key in ["service:svc_notes", "client:other"] {
        assert!(store.consents().record(&grant_id, &alice, key, None, &tokens.scopes, app.now()).await.unwrap());
    }

    // Act
    let removed = admin(app, &["services", "remove", "notes"]);

    // Assert
    assert!(removed.status.success(), "{}", String::from_utf8_lossy(&removed.stderr));
    assert!(String::from_utf8_lossy(&removed.stdout).contains("1 consent(s)"));
    assert!(store.consents().find(&grant_id, "service:svc_notes").await.unwrap().is_none());
    assert!(store.consents().find(&grant_id, "client:other").await.unwrap().is_some(), "other clients keep theirs");
    assert!(store.services().by_name("notes").await.unwrap().is_none());
    is_invalid_client(app, &basic("svc_notes", &secret)).await;
    refused(&admin(app, &["services", "remove", "notes"]), "no service named notes");
    let audit = store.audit().entries(None, 10).await.unwrap();
    assert!(audit.iter().any(|e| e.action == "service.removed"));
}

on_both_backends!(remove, removing_a_service_removes_its_consents_only);
