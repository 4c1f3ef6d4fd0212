//! A server's lists shared by the instances (issue 26, items 2 and 6): what one instance read of a
//! server behind the broker is listed by every other, and by an instance that starts later,
//! before any of its own users connected to that server. Instance A runs in the test process,
//! instance B is the real binary in its own process on A's database.

use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{Peer, RoleClient};
use serde_json::json;

use crate::helpers::cluster::OtherInstance;
use crate::helpers::gateway::{ListChangeCounter, Upstream, add_provider_server, connect_through_link, tool_names};
use crate::helpers::token_api::url_elicitation_required;
use crate::helpers::*;
use crate::on_both_backends;
use oauth_broker::store::gateway::{ListKind, ListSummary};

/// Alice connects the server through A's connect tool: A reads its lists.
async fn alice_connects_on(a: &TestApp) -> McpClient {
    let alice = a.mcp_client(ALICE, ClientKind::Url).await;
    connect_through_link(a, &alice, "notes_connect", ALICE, "alice-demo").await;
    assert_ne!(alice.call("notes_connect", json!({})).await.unwrap().is_error, Some(true));
    alice
}

async fn prompt_names(client: &Peer<RoleClient>) -> Vec<String> {
    client.list_all_prompts().await.unwrap().into_iter().map(|p| p.name).collect()
}

async fn resource_uris(client: &Peer<RoleClient>) -> Vec<String> {
    client.list_all_resources().await.unwrap().into_iter().map(|r| r.uri).collect()
}

async fn a_later_instance_lists_what_another_read_before_any_of_its_users_connected(a: &TestApp) {
    // Arrange: a server that takes each user's demo token; Alice connects it on A, so A has read
    // its tools, prompts and resources.
    let upstream = Upstream::bearer(a).await;
    add_provider_server(a, "notes", &upstream).await;
    let alice = alice_connects_on(a).await;
    // An instance of an older build, still running in a rolling upgrade, stores the resources
    // it read with Alice's credential, as builds before migration 0038 did.
    let server = a.state.core.store.gateway_servers().by_name("notes").await.unwrap().unwrap().id;
    let older = r#"{"resources":[{"uri":"note://inbox/alice-demo","name":"alice-demo's inbox"}],"templates":[{"uriTemplate":"note://echo/{text}","name":"echo"}]}"#;
    a.state.core.store.gateway_lists().put(&server, ListKind::Resources, older, a.now()).await.unwrap();

    // Act: instance B starts (as after a deploy or a restart); Bob, who never connected the
    // server anywhere, lists on B.
    let b = OtherInstance::start(a, "").await;
    let bob = b.mcp_client(a, BOB, ClientKind::Url).await;

    // Assert: B lists the server's own tools, prompts and resources, not its connect tool.
    let names = tool_names(&bob).await;
    for tool in ["notes_whoami", "notes_echo", "notes_add_note"] {
        assert!(names.contains(&tool.to_owned()), "{tool} in {names:?}");
    }
    assert!(!names.contains(&"notes_connect".to_owned()), "{names:?}");
    let echo = bob.peer().list_all_tools().await.unwrap().into_iter().find(|t| t.name == "notes_echo").unwrap();
    assert_eq!(echo.description.as_deref(), Some("Echoes its text"));
    assert!(prompt_names(bob.peer()).await.contains(&"notes_greeting".to_owned()));
    let templates = bob.peer().list_all_resource_templates().await.unwrap();
    assert!(templates.iter().any(|t| t.uri_template == "gateway://notes/note://echo/{text}"), "{templates:?}");
    // Resources are each user's own (Alice's inbox is hers): none reached B for Bob to see.
    let uris = resource_uris(bob.peer()).await;
    assert!(!uris.iter().any(|u| u.starts_with("gateway://notes/")), "{uris:?}");
    // Alice lists her own on B, read over B's connection with her credential.
    let alice_on_b = b.mcp_client(a, ALICE, ClientKind::Url).await;
    let uris = resource_uris(alice_on_b.peer()).await;
    assert!(uris.contains(&"gateway://notes/note://inbox/alice-demo".to_owned()), "{uris:?}");
    alice_on_b.close().await;
    // B's first read of the server (over that connection) writes over the older build's row.
    eventually("the older build's row is written over", Duration::from_secs(10), || async {
        let stored = a.state.core.store.gateway_lists().of(&server).await.unwrap();
        stored.iter().all(|l| !l.listed.contains("inbox"))
    })
    .await;

    // The list is not a credential: Bob's first call still asks him to connect, on B's pages.
    let (_, url) = url_elicitation_required(bob.call("notes_whoami", json!({})).await);
    assert!(url.starts_with(&a.url("/connect/")), "{url}");
    // And B checks arguments against the schema it was given, as A does.
    match bob.call("notes_echo", json!({"text": 5})).await {
        Err(rmcp::ServiceError::McpError(e)) => assert_eq!(e.message, "text: must be of type string"),
        other => panic!("expected -32602, got {other:?}"),
    }
    bob.close().await;
    alice.close().await;
    drop(b);
    upstream.stop().await;
}
on_both_backends!(later_instance, a_later_instance_lists_what_another_read_before_any_of_its_users_connected);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_read_on_one_instance_reaches_the_listening_clients_of_another_at_once() {
    // Arrange: A and B on one PostgreSQL database, the server registered before B starts; Bob's
    // session on B listens. Nobody has connected the server: B lists its connect tool.
    let Some(a) = spawn_app(Backend::Postgres).await else { return };
    let upstream = Upstream::bearer(&a).await;
    add_provider_server(&a, "notes", &upstream).await;
    let b = OtherInstance::start(&a, "").await;
    let counting = ListChangeCounter::default();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(b.mcp_url()).auth_header(a.token_for(BOB).await),
    );
    let bob = counting.clone().serve_with_lifecycle(transport, ClientLifecycleMode::Initialize).await.unwrap();
    // Its first request binds its session, whose stream relays the notifications from then on.
    let before: Vec<String> = bob.peer().list_all_tools().await.unwrap().into_iter().map(|t| t.name.into()).collect();
    assert!(before.contains(&"notes_connect".to_owned()), "{before:?}");

    // Act: Alice connects the server on A.
    let alice = alice_connects_on(&a).await;

    // Assert: Bob's session on B is told its tools changed, and lists the server's own.
    eventually("Bob's session on B hears that the tools changed", Duration::from_secs(10), || async {
        counting.tools.load(Ordering::SeqCst) > 0 && counting.resources.load(Ordering::SeqCst) > 0
    })
    .await;
    let names: Vec<String> = bob.peer().list_all_tools().await.unwrap().into_iter().map(|t| t.name.into()).collect();
    assert!(names.contains(&"notes_echo".to_owned()) && !names.contains(&"notes_connect".to_owned()), "{names:?}");
    assert!(prompt_names(bob.peer()).await.contains(&"notes_greeting".to_owned()));

    // Act: a tool of the server changes its prompts and resources, which it announces to A.
    let (prompts, resources) = (counting.prompts.load(Ordering::SeqCst), counting.resources.load(Ordering::SeqCst));
    let added = alice.call("notes_add_note", json!({"title": "n1"})).await.unwrap();
    assert_ne!(added.is_error, Some(true), "{added:?}");

    // Assert: B hears of it through the database and tells Bob, who lists the new prompt. (The
    // server's resources are each user's own, read when they list: Bob, who has not connected
    // it, has none to see, but is told to list again, as the server may have changed his.)
    eventually("Bob's session on B hears both list changes", Duration::from_secs(10), || async {
        counting.prompts.load(Ordering::SeqCst) > prompts && counting.resources.load(Ordering::SeqCst) > resources
    })
    .await;
    assert!(prompt_names(bob.peer()).await.contains(&"notes_note_n1".to_owned()));
    assert!(!resource_uris(bob.peer()).await.iter().any(|u| u.starts_with("gateway://notes/")));
    // The tools changed once, however many signals B heard (one per list stored).
    assert_eq!(counting.tools.load(Ordering::SeqCst), 1);
    let _ = bob.cancel().await;
    alice.close().await;
    drop(b);
    upstream.stop().await;
    a.stop().await;
}

async fn a_stored_list_that_does_not_parse_is_left_out_and_the_next_read_replaces_it(a: &TestApp) {
    // Arrange: the server registered, and a tool list stored for it that is not JSON (written by
    // hand, or by a build that stored something else).
    let upstream = Upstream::bearer(a).await;
    add_provider_server(a, "notes", &upstream).await;
    let server = a.state.core.store.gateway_servers().by_name("notes").await.unwrap().unwrap().id;
    a.state.core.store.gateway_lists().put(&server, ListKind::Tools, "not json", a.now()).await.unwrap();

    // Act: B starts and reads what is stored.
    let b = OtherInstance::start(a, "").await;
    let bob = b.mcp_client(a, BOB, ClientKind::Url).await;

    // Assert: B starts, lists the connect tool (the list is unknown), and Bob connects through
    // it; the read replaces the stored list, which parses again.
    assert!(tool_names(&bob).await.contains(&"notes_connect".to_owned()));
    connect_through_link(a, &bob, "notes_connect", BOB, "bob-demo").await;
    // The approval was made on A's pages: B's caches see it at their next poll of the database.
    eventually("B connects Bob", Duration::from_secs(10), || async {
        bob.call("notes_connect", json!({})).await.is_ok_and(|r| r.is_error != Some(true))
    })
    .await;
    let stored = a.state.core.store.gateway_lists().of(&server).await.unwrap();
    let tools = ListSummary::of(&server, &stored).tools.expect("the stored list parses");
    assert_eq!(tools, tool_names(&bob).await.iter().filter(|n| n.starts_with("notes_")).count());
    bob.close().await;
    drop(b);
    upstream.stop().await;
}
on_both_backends!(unparsable, a_stored_list_that_does_not_parse_is_left_out_and_the_next_read_replaces_it);

async fn an_instance_reads_stored_lists_again_over_its_first_connection_and_shares_a_change(a: &TestApp) {
    // Arrange: A read the server's lists after Alice added a note (so the stored prompts hold
    // its prompt); then the server restarts on the same address without it, announcing nothing.
    let upstream = Upstream::bearer(a).await;
    let address = upstream.mcp_url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    add_provider_server(a, "notes", &upstream).await;
    let alice = alice_connects_on(a).await;
    assert_ne!(alice.call("notes_add_note", json!({"title": "n1"})).await.unwrap().is_error, Some(true));
    let server = a.state.core.store.gateway_servers().by_name("notes").await.unwrap().unwrap().id;
    let noted = || async {
        let stored = a.state.core.store.gateway_lists().of(&server).await.unwrap();
        stored.iter().any(|l| l.kind == ListKind::Prompts && l.listed.contains("note_n1"))
    };
    eventually("A stored the prompts with the note's", Duration::from_secs(10), noted).await;
    alice.close().await;
    upstream.stop().await;
    let restarted = Upstream::start(&["--listen", &address, "--require-bearer", &a.url("/demo-provider")], None).await;

    // Act: B starts (it takes the stored lists, the note among them), and Alice calls a tool
    // on B: B's first connection to the server.
    let b = OtherInstance::start(a, "").await;
    let on_b = b.mcp_client(a, ALICE, ClientKind::Url).await;
    assert!(prompt_names(on_b.peer()).await.contains(&"notes_note_n1".to_owned()));
    let echoed = on_b.call("notes_echo", json!({"text": "hi"})).await.unwrap();
    assert_eq!(echoed.structured_content.unwrap()["text"], "hi");

    // Assert: B read the lists over that connection, found the note gone, and stored that for
    // every instance: A lists it no more either.
    eventually("the note's prompt is gone from the stored prompts", Duration::from_secs(10), || async {
        !noted().await
    })
    .await;
    eventually("A no longer lists the note's prompt", Duration::from_secs(10), || async {
        let on_a = a.mcp_client(ALICE, ClientKind::Url).await;
        let names = prompt_names(on_a.peer()).await;
        on_a.close().await;
        !names.contains(&"notes_note_n1".to_owned())
    })
    .await;
    on_b.close().await;
    drop(b);
    restarted.stop().await;
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_reads_stored_lists_again_over_its_first_connection_and_shares_a_change_on_postgres() {
    let Some(a) = spawn_app(Backend::Postgres).await else { return };
    an_instance_reads_stored_lists_again_over_its_first_connection_and_shares_a_change(&a).await;
    a.stop().await;
}

/// Upgrading over lists an older build stored (migration 0038): a server that acts as the user
/// keeps its templates but loses the resources read with one user's credential; a server that
/// serves every user alike keeps both; a row that does not parse is removed, to be read again.
async fn upgrading_removes_the_resources_an_older_build_stored_for_a_server_that_acts_as_the_user(backend: Backend) {
    use oauth_broker::domain::gateway::{CredentialHeader, CredentialScheme, ServerName};
    use oauth_broker::domain::{ProviderId, Scopes};
    use oauth_broker::store::Store;
    use oauth_broker::store::gateway::{GatewayAuth, GatewayServerRow};

    // Arrange: the schema as the build before, three servers, and the lists it stored.
    let Some(db) = EmptyDatabase::create(backend).await else { return };
    let store = Store::connect(&db.url).await.unwrap();
    let folder = if backend == Backend::Sqlite { "sqlite" } else { "postgres" };
    let before = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(format!("{}/migrations/{folder}", env!("CARGO_MANIFEST_DIR"))).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if name.as_str() < "0038" {
            std::fs::copy(&path, before.path().join(name)).unwrap();
        }
    }
    sqlx::migrate::Migrator::new(before.path()).await.unwrap().run(store.pool()).await.unwrap();
    let per_user = GatewayAuth::Provider {
        provider: ProviderId::parse("demo").unwrap(),
        scopes: Scopes::parse(["profile"]).unwrap(),
        header: CredentialHeader::authorization(),
        scheme: CredentialScheme::bearer(),
    };
    let servers = [
        ("mine", per_user.clone()),
        ("open", GatewayAuth::None),
        ("broken", per_user.clone()),
        ("listy", per_user.clone()),
        ("nul", per_user),
    ];
    for (name, auth) in servers {
        let name = ServerName::parse(name).unwrap();
        let row = GatewayServerRow {
            id: format!("id-{name}"),
            prefix: name.default_prefix(),
            name,
            url: url::Url::parse("https://mcp.example/mcp").unwrap(),
            auth,
            created_at: 1,
            updated_at: 1,
        };
        store.gateway_servers().create(&row).await.unwrap();
    }
    let listed = r#"{"resources":[{"uri":"note://inbox/alice-demo","name":"alice-demo's inbox"}],"templates":[{"uriTemplate":"note://echo/{text}","name":"echo"}]}"#;
    store.gateway_lists().put("id-mine", ListKind::Resources, listed, 5).await.unwrap();
    store.gateway_lists().put("id-mine", ListKind::Tools, r#"[{"name":"alice-demo"}]"#, 5).await.unwrap();
    store.gateway_lists().put("id-open", ListKind::Resources, listed, 5).await.unwrap();
    store.gateway_lists().put("id-broken", ListKind::Resources, "not json", 5).await.unwrap();
    store
        .gateway_lists()
        .put("id-listy", ListKind::Resources, r#"[{"uri":"note://inbox/alice-demo"}]"#, 5)
        .await
        .unwrap();
    // JSON that PostgreSQL's jsonb cannot hold (a NUL escape, from a server's resource name).
    let nul = r#"{"resources":[{"uri":"note://inbox/alice-demo","name":"a\u0000"}],"templates":[]}"#;
    store.gateway_lists().put("id-nul", ListKind::Resources, nul, 5).await.unwrap();

    // Act: this build's migrations.
    store.migrate().await.unwrap();

    // Assert
    let stored = store.gateway_lists().all().await.unwrap();
    let of = |id: &str, kind: ListKind| stored.iter().find(|l| l.server_id == id && l.kind == kind);
    let mine = of("id-mine", ListKind::Resources).expect("the templates are kept");
    let value: serde_json::Value = serde_json::from_str(&mine.listed).unwrap();
    assert_eq!(value["resources"], json!([]), "{value}");
    assert_eq!(value["templates"][0]["uriTemplate"], "note://echo/{text}", "{value}");
    assert_eq!(mine.version, 2, "the version moves, so every instance takes the row again");
    assert_eq!(of("id-mine", ListKind::Tools).unwrap().listed, r#"[{"name":"alice-demo"}]"#, "tools untouched");
    assert_eq!(of("id-open", ListKind::Resources).unwrap().listed, listed, "a server for everyone keeps its own");
    assert!(of("id-broken", ListKind::Resources).is_none(), "an unreadable row is read again");
    assert!(of("id-listy", ListKind::Resources).is_none(), "so is JSON of another shape");
    let nul = of("id-nul", ListKind::Resources);
    assert!(nul.is_none_or(|l| !l.listed.contains("inbox")), "blanked or removed, never kept: {nul:?}");
    store.close().await;
    db.drop_now().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrading_removes_stored_user_resources_sqlite() {
    upgrading_removes_the_resources_an_older_build_stored_for_a_server_that_acts_as_the_user(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrading_removes_stored_user_resources_postgres() {
    upgrading_removes_the_resources_an_older_build_stored_for_a_server_that_acts_as_the_user(Backend::Postgres).await;
}
