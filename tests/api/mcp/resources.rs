//! Resources (MCP 2025-11-25 server/resources): the user's connections, the provider
//! catalogue, the per-connection template, -32002 for anything else, no secret material in any
//! of them, one user never seeing another's, and `notifications/resources/updated` reaching
//! exactly the sessions subscribed to a URI of the user whose connection changed.

// `resources/subscribe` is deprecated for 2026-07-28 but is part of 2025-11-25.
#![allow(deprecated)]

use std::time::Duration;

use oauth_broker::crypto::SealContext;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, PaginatedRequestParams, ReadResourceRequestParams,
    ResourceUpdatedNotificationParam, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError, ServiceExt};
use secrecy::ExposeSecret;
use serde_json::{Value, json};
use tokio::sync::{Mutex, mpsc};

use crate::helpers::{ALICE, BOB, Backend, ClientKind, TestApp, spawn_app};
use crate::on_both_backends;

const CONNECTIONS: &str = "broker://connections";
const PROVIDERS: &str = "broker://providers";
const DEMO: &str = "broker://connections/demo";

/// A client that records every `notifications/resources/updated` it receives.
struct UpdateRecorder {
    updates: mpsc::UnboundedSender<String>,
}

impl ClientHandler for UpdateRecorder {
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        let _ = self.updates.send(params.uri);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("resource-watcher", "1.0.0"))
    }
}

struct Watcher {
    service: RunningService<RoleClient, UpdateRecorder>,
    updates: Mutex<mpsc::UnboundedReceiver<String>>,
}

impl Watcher {
    async fn start(app: &TestApp, name: &str) -> Self {
        let token = app.token_for(name).await;
        let (tx, rx) = mpsc::unbounded_channel();
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(app.mcp_url()).auth_header(token),
        );
        let service = UpdateRecorder { updates: tx }.serve(transport).await.unwrap();
        // A first request, so the session's relay is running even if it never subscribes.
        service.peer().list_resources(None).await.unwrap();
        Self { service, updates: Mutex::new(rx) }
    }

    fn peer(&self) -> &Peer<RoleClient> {
        self.service.peer()
    }

    async fn subscribe(&self, uri: &str) {
        self.peer().subscribe(SubscribeRequestParams::new(uri)).await.unwrap();
    }

    async fn next_update(&self, wait: Duration) -> Option<String> {
        tokio::time::timeout(wait, self.updates.lock().await.recv()).await.ok().flatten()
    }

    /// Every update that arrives within `wait`.
    async fn updates_within(&self, wait: Duration) -> Vec<String> {
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + wait;
        let mut updates = self.updates.lock().await;
        while let Ok(Some(uri)) = tokio::time::timeout_at(deadline, updates.recv()).await {
            seen.push(uri);
        }
        seen
    }

    async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

async fn read(peer: &Peer<RoleClient>, uri: &str) -> Result<(String, Value), ServiceError> {
    let result = peer.read_resource(ReadResourceRequestParams::new(uri)).await?;
    let contents = serde_json::to_value(&result.contents).unwrap();
    assert_eq!(contents.as_array().unwrap().len(), 1, "{contents}");
    assert_eq!(contents[0]["uri"], uri);
    assert_eq!(contents[0]["mimeType"], "application/json");
    let text = contents[0]["text"].as_str().unwrap().to_owned();
    let body = serde_json::from_str(&text).unwrap();
    Ok((text, body))
}

fn demo_entry<'a>(body: &'a Value, list: &str, key: &str) -> &'a Value {
    body[list].as_array().unwrap().iter().find(|e| e[key] == "demo").unwrap_or_else(|| panic!("no demo in {body}"))
}

fn collect_keys(value: &Value, keys: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                keys.push(key.clone());
                collect_keys(inner, keys);
            }
        }
        Value::Array(items) => items.iter().for_each(|inner| collect_keys(inner, keys)),
        _ => {}
    }
}

fn assert_not_found(result: Result<(String, Value), ServiceError>, uri: &str) {
    match result {
        Err(ServiceError::McpError(e)) => {
            assert_eq!(e.code.0, -32002, "{uri}: {e:?}");
            assert!(e.message.starts_with("resource not found: "), "{uri}: {}", e.message);
            assert!(!e.message.contains(['<', '>', '"', '\n']), "{uri} reflected unescaped: {}", e.message);
        }
        other => panic!("{uri}: expected -32002, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_lists_its_two_resources_and_the_connection_template() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client = app.mcp_client(ALICE, ClientKind::NoElicitation).await;

    let listed = client.peer().list_resources(None).await.unwrap();
    assert_eq!(listed.next_cursor, None);
    let uris: Vec<&str> = listed.resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, [CONNECTIONS, PROVIDERS]);
    for resource in &listed.resources {
        assert!(!resource.name.is_empty());
        assert!(resource.title.is_some() && resource.description.is_some(), "{resource:?}");
        assert_eq!(resource.mime_type.as_deref(), Some("application/json"));
    }

    let templates = client.peer().list_resource_templates(None).await.unwrap();
    assert_eq!(templates.resource_templates.len(), 1);
    let template = &templates.resource_templates[0];
    assert_eq!(template.uri_template, "broker://connections/{provider}");
    assert!(template.title.is_some() && template.description.as_deref().unwrap().contains("demo"));
    assert_eq!(template.mime_type.as_deref(), Some("application/json"));

    // MCP utilities/pagination: an invalid cursor is -32602.
    let bad = client.peer().list_resources(Some(PaginatedRequestParams::default().with_cursor(Some("nope".into()))));
    assert!(matches!(bad.await, Err(ServiceError::McpError(e)) if e.code.0 == -32602));

    client.close().await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_or_malformed_uris_are_not_found_and_cannot_be_subscribed() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client = app.mcp_client(ALICE, ClientKind::NoElicitation).await;

    for uri in [
        "broker://connections/nope",
        "broker://connections/",
        "broker://connections/Demo",
        "broker://connections/demo/",
        "broker://connections/demo?x=1",
        "broker://connections/%64emo",
        "broker://connections/../providers",
        "broker://connections/<script>alert(1)</script>",
        "broker://providers/demo",
        "BROKER://connections",
        "broker://secrets",
        "file:///etc/passwd",
        "broker://connections/\"\n",
    ] {
        assert_not_found(read(client.peer(), uri).await, uri);
        let subscribed = client.peer().subscribe(SubscribeRequestParams::new(uri)).await;
        assert!(matches!(subscribed, Err(ServiceError::McpError(e)) if e.code.0 == -32002), "subscribe {uri}");
    }
    // The message names the URI.
    match read(client.peer(), "broker://connections/nope").await {
        Err(ServiceError::McpError(e)) => assert!(e.message.contains("broker://connections/nope"), "{}", e.message),
        other => panic!("{other:?}"),
    }
    for uri in [CONNECTIONS, PROVIDERS, DEMO] {
        client.peer().subscribe(SubscribeRequestParams::new(uri)).await.unwrap();
    }

    client.close().await;
    app.stop().await;
}

async fn resources_show_the_connection_and_never_a_secret(app: &TestApp) {
    let alice = app.connected_client(ALICE).await;
    let user = app.user_id(ALICE).await;
    let grant = app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().unwrap();
    let owner = format!("{user}/demo");
    let open = |sealed: &[u8], column| {
        let ctx = SealContext { table: "grants", column, row_id: &grant.id, owner: &owner };
        String::from_utf8(app.state.core.sealer.open(sealed, ctx).unwrap()).unwrap()
    };
    let access_token = open(&grant.access_token_sealed, "access_token");
    let refresh_token = open(grant.refresh_token_sealed.as_deref().unwrap(), "refresh_token");
    let client_secret =
        app.state.core.providers.find("demo").unwrap().client_secret.as_ref().unwrap().expose_secret().to_owned();

    let (connections_text, connections) = read(alice.peer(), CONNECTIONS).await.unwrap();
    let entry = demo_entry(&connections, "connections", "provider");
    assert_eq!(entry["status"], "connected");
    assert_eq!(entry["connected"], true);
    assert_eq!(entry["display_name"], "Demo Provider");
    assert_eq!(entry["account"], grant.account_label.clone().map_or(Value::Null, Value::from));
    assert!(entry["scopes"].as_array().unwrap().contains(&json!("profile")), "{entry}");
    assert!(entry["expires_at"].as_i64().unwrap() > app.now());
    assert_eq!(entry["updated_at"], grant.updated_at);
    assert_eq!(entry["uri"], DEMO);

    let (one_text, one) = read(alice.peer(), DEMO).await.unwrap();
    assert_eq!(&one, entry, "the template resource is the same entry");

    let (providers_text, providers) = read(alice.peer(), PROVIDERS).await.unwrap();
    let demo = demo_entry(&providers, "providers", "id");
    assert_eq!(demo["display_name"], "Demo Provider");
    assert_eq!(demo["connected"], true);
    assert_eq!(demo["supports_revocation"], true);
    assert_eq!(demo["default_scopes"], json!(["notes:read", "profile"]));
    assert!(demo["api_base_url"].as_str().unwrap().ends_with("/demo-provider/api/"), "{demo}");

    for text in [&connections_text, &one_text, &providers_text] {
        assert!(!text.contains(&access_token), "access token in {text}");
        assert!(!text.contains(&refresh_token), "refresh token in {text}");
        assert!(!text.contains(&client_secret), "client secret in {text}");
        assert!(!text.contains(&grant.key_id), "key id in {text}");
        let mut keys = Vec::new();
        collect_keys(&serde_json::from_str(text).unwrap(), &mut keys);
        for key in keys {
            let forbidden = ["access_token", "refresh_token", "key_id", "client_id", "client_secret"]
                .contains(&key.as_str())
                || key.contains("sealed")
                || key.contains("secret");
            assert!(!forbidden, "{key} in {text}");
        }
    }
    alice.close().await;
}
on_both_backends!(no_secrets, resources_show_the_connection_and_never_a_secret);

async fn bob_never_sees_alices_connection(app: &TestApp) {
    let alice = app.connected_client(ALICE).await;
    let bob = app.mcp_client(BOB, ClientKind::NoElicitation).await;

    let (_, connections) = read(bob.peer(), CONNECTIONS).await.unwrap();
    let entry = demo_entry(&connections, "connections", "provider");
    assert_eq!(entry["status"], "not_connected");
    assert_eq!(entry["account"], Value::Null);
    assert_eq!(entry["scopes"], json!([]));
    assert_eq!(entry["expires_at"], Value::Null);
    let (_, one) = read(bob.peer(), DEMO).await.unwrap();
    assert_eq!(one["status"], "not_connected");
    let (_, providers) = read(bob.peer(), PROVIDERS).await.unwrap();
    assert_eq!(demo_entry(&providers, "providers", "id")["connected"], false);
    // …while Alice, on her own session, is connected.
    let (_, mine) = read(alice.peer(), DEMO).await.unwrap();
    assert_eq!(mine["status"], "connected");

    bob.close().await;
    alice.close().await;
}
on_both_backends!(isolation, bob_never_sees_alices_connection);

async fn subscribers_hear_about_connect_refresh_and_disconnect(app: &TestApp) {
    let watcher = Watcher::start(app, ALICE).await;
    watcher.subscribe(CONNECTIONS).await;
    let per_provider = Watcher::start(app, ALICE).await;
    per_provider.subscribe(DEMO).await;
    let never_subscribed = Watcher::start(app, ALICE).await;
    let unsubscribed = Watcher::start(app, ALICE).await;
    unsubscribed.subscribe(CONNECTIONS).await;
    unsubscribed.peer().unsubscribe(UnsubscribeRequestParams::new(CONNECTIONS)).await.unwrap();
    let bob = Watcher::start(app, BOB).await;
    bob.subscribe(CONNECTIONS).await;
    bob.subscribe(DEMO).await;
    let quiet = [&never_subscribed, &unsubscribed, &bob];

    // Connect (grant stored).
    let alice = app.connected_client(ALICE).await;
    assert_eq!(watcher.next_update(Duration::from_secs(10)).await.as_deref(), Some(CONNECTIONS));
    assert_eq!(per_provider.next_update(Duration::from_secs(10)).await.as_deref(), Some(DEMO));
    for other in quiet {
        assert_eq!(other.next_update(Duration::from_millis(500)).await, None);
    }
    let (_, connected) = read(watcher.peer(), DEMO).await.unwrap();
    assert_eq!(connected["status"], "connected");

    // Refresh: the demo provider's access tokens live an hour.
    app.clock.advance(2 * 3600);
    let me = alice.call("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
    assert_eq!(me.unwrap().structured_content.unwrap()["status"], 200);
    assert_eq!(watcher.next_update(Duration::from_secs(10)).await.as_deref(), Some(CONNECTIONS));
    assert_eq!(per_provider.next_update(Duration::from_secs(10)).await.as_deref(), Some(DEMO));
    let (_, refreshed) = read(watcher.peer(), DEMO).await.unwrap();
    assert!(refreshed["expires_at"].as_i64().unwrap() > app.now());

    // Disconnect.
    let disconnecter = app.mcp_client(ALICE, ClientKind::NoElicitation).await;
    let result = disconnecter.call("disconnect_account", json!({"provider": "demo"})).await.unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert!(app.state.core.store.grants().latest(&app.user_id(ALICE).await, "demo", None).await.unwrap().is_none());
    assert_eq!(watcher.next_update(Duration::from_secs(10)).await.as_deref(), Some(CONNECTIONS));
    assert_eq!(per_provider.next_update(Duration::from_secs(10)).await.as_deref(), Some(DEMO));
    let (_, gone) = read(watcher.peer(), DEMO).await.unwrap();
    assert_eq!(gone["status"], "not_connected");

    // Nothing else arrived anywhere: one notification per change, to subscribers only.
    assert_eq!(watcher.updates_within(Duration::from_millis(500)).await, Vec::<String>::new());
    assert_eq!(per_provider.updates_within(Duration::from_millis(100)).await, Vec::<String>::new());
    for other in quiet {
        assert_eq!(other.updates_within(Duration::from_millis(100)).await, Vec::<String>::new());
    }

    disconnecter.close().await;
    alice.close().await;
    for watcher in [watcher, per_provider, never_subscribed, unsubscribed, bob] {
        watcher.close().await;
    }
}
on_both_backends!(subscriptions, subscribers_hear_about_connect_refresh_and_disconnect);
