//! Prompts and completion (MCP 2025-11-25 server/prompts, server/utilities/completion and
//! pagination): the built-in catalogue, operator files picked up while the server runs (and
//! `notifications/prompts/list_changed` when they change), argument checks and injection,
//! and completions that never show another user's data.

use std::time::Duration;

use oauth_broker::crypto::SealContext;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CompletionContext, ContentBlock, ErrorCode, GetPromptRequestParams,
    GetPromptResult, Implementation, PaginatedRequestParams, Prompt,
};
use rmcp::service::NotificationContext;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError, ServiceExt};
use secrecy::ExposeSecret;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::helpers::{ALICE, BOB, Backend, ClientKind, McpClient, TestApp, eventually, spawn_app};
use crate::on_both_backends;

/// How long the directory watcher (1 s polls) gets to notice a change.
const WATCH_WAIT: Duration = Duration::from_secs(15);

fn write_prompt_file(app: &TestApp, file: &str, text: &str) {
    let dir = &app.state.core.config.prompts_dir;
    std::fs::create_dir_all(dir).unwrap();
    // Write then rename, as a deploy would: the watcher never sees half a file.
    let partial = dir.join(format!(".{file}.partial"));
    std::fs::write(&partial, text).unwrap();
    std::fs::rename(partial, dir.join(file)).unwrap();
}

fn text_prompt(name: &str, arguments: &[(&str, bool)], text: &str) -> String {
    let mut out = format!("name = \"{name}\"\ndescription = \"Operator prompt {name}\"\n");
    for (argument, required) in arguments {
        out.push_str(&format!("[[arguments]]\nname = \"{argument}\"\nrequired = {required}\n"));
    }
    out.push_str(&format!("[[messages]]\nrole = \"user\"\ncontent = {{ type = \"text\", text = '''{text}''' }}\n"));
    out
}

async fn all_names(peer: &Peer<RoleClient>) -> Vec<String> {
    peer.list_all_prompts().await.unwrap().into_iter().map(|p| p.name).collect()
}

/// Polls `prompts/list` until `done` holds (the watcher works in the background).
async fn wait_for_prompts(peer: &Peer<RoleClient>, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    eventually("the catalogue changes", WATCH_WAIT, || async {
        let names = all_names(peer).await;
        if done(&names) { Ok(names) } else { Err(format!("{names:?}")) }
    })
    .await
}

async fn get(peer: &Peer<RoleClient>, name: &str, arguments: Value) -> Result<GetPromptResult, ServiceError> {
    let mut params = GetPromptRequestParams::new(name);
    params.arguments = arguments.as_object().cloned();
    peer.get_prompt(params).await
}

fn invalid_params(result: Result<impl std::fmt::Debug, ServiceError>) -> String {
    match result {
        Err(ServiceError::McpError(e)) if e.code == ErrorCode::INVALID_PARAMS => e.message.to_string(),
        other => panic!("expected -32602, got {other:?}"),
    }
}

fn text_of(result: &GetPromptResult) -> String {
    result.messages.iter().filter_map(|m| m.content.as_text()).map(|t| t.text.as_str()).collect::<Vec<_>>().join("\n")
}

#[tokio::test]
async fn the_builtin_prompts_have_titles_descriptions_and_typed_arguments() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client = app.mcp_client(ALICE, ClientKind::Url).await;

    let prompts: Vec<Prompt> = client.peer().list_all_prompts().await.unwrap();

    let find = |name: &str| prompts.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("{name} listed"));
    for prompt in &prompts {
        assert!(prompt.title.is_some() && prompt.description.is_some(), "{prompt:?}");
    }
    let required = |p: &Prompt| -> Vec<(String, bool)> {
        p.arguments.iter().flatten().map(|a| (a.name.clone(), a.required == Some(true))).collect()
    };
    assert_eq!(required(find("connect_provider")), [("provider".into(), true), ("scopes".into(), false)]);
    assert_eq!(required(find("review_connections")), []);
    assert_eq!(required(find("use_provider_api")), [("provider".into(), true), ("task".into(), true)]);
    client.close().await;
    app.stop().await;
}

#[tokio::test]
async fn prompts_list_pages_with_an_opaque_cursor_and_refuses_a_bad_one() {
    // Arrange: enough operator files for two pages of the default 50.
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    for i in 0..60 {
        write_prompt_file(&app, &format!("p{i:02}.toml"), &text_prompt(&format!("op_{i:02}"), &[], "hello"));
    }
    wait_for_prompts(client.peer(), |names| names.len() == 63).await;

    // Act
    let first = client.peer().list_prompts(None).await.unwrap();
    let cursor = first.next_cursor.clone().expect("a second page");
    let second =
        client.peer().list_prompts(Some(PaginatedRequestParams::default().with_cursor(Some(cursor)))).await.unwrap();
    let bad = client
        .peer()
        .list_prompts(Some(PaginatedRequestParams::default().with_cursor(Some("not-a-cursor".into()))))
        .await;

    // Assert
    assert_eq!(first.prompts.len(), 50);
    assert_eq!(first.prompts[0].name, "connect_provider", "built-ins come first");
    assert_eq!(first.prompts[3].name, "op_00", "then operator files, by name");
    assert_eq!(second.prompts.len(), 13);
    assert!(second.next_cursor.is_none());
    assert_eq!(second.prompts.last().unwrap().name, "op_59");
    invalid_params(bad);
    client.close().await;
    app.stop().await;
}

#[tokio::test]
async fn get_checks_the_prompt_name_and_its_arguments() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let peer = client.peer();

    let unknown = invalid_params(get(peer, "no_such_prompt", json!({})).await);
    let missing = invalid_params(get(peer, "connect_provider", json!({})).await);
    let extra = invalid_params(get(peer, "connect_provider", json!({"provider": "demo", "surprise": "x"})).await);
    let provider = invalid_params(get(peer, "connect_provider", json!({"provider": "nowhere"})).await);
    let task = invalid_params(get(peer, "use_provider_api", json!({"provider": "demo"})).await);

    assert!(unknown.contains("no_such_prompt"), "{unknown}");
    assert!(missing.contains("provider"), "{missing}");
    assert!(extra.contains("surprise"), "{extra}");
    assert!(provider.contains("nowhere") && provider.contains("demo"), "{provider}");
    assert!(task.contains("task"), "{task}");
    client.close().await;
    app.stop().await;
}

#[tokio::test]
async fn connect_provider_explains_the_demo_scopes_and_asks_for_connect_account() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client = app.mcp_client(ALICE, ClientKind::Url).await;

    let named = get(client.peer(), "connect_provider", json!({"provider": "demo", "scopes": "notes:write"})).await;
    let defaults = get(client.peer(), "connect_provider", json!({"provider": "demo"})).await.unwrap();

    let named = named.unwrap();
    assert!(named.description.is_some());
    let text = text_of(&named);
    assert!(text.contains("`notes:write`: create new notes (POST /notes"), "{text}");
    assert!(!text.contains("`profile`"), "only the requested scope: {text}");
    assert!(text.contains(r#"connect_account tool with {"provider":"demo","scopes":["notes:write"]}"#), "{text}");
    let text = text_of(&defaults);
    assert!(text.contains("`profile`") && text.contains("`notes:read`"), "the demo defaults: {text}");
    client.close().await;
    app.stop().await;
}

#[tokio::test]
async fn use_provider_api_guides_the_model_with_the_base_url_and_the_task() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client = app.mcp_client(ALICE, ClientKind::Url).await;

    let result =
        get(client.peer(), "use_provider_api", json!({"provider": "demo", "task": "List my notes about {{cats}}"}))
            .await
            .unwrap();

    let text = text_of(&result);
    let base = app.state.core.providers.find("demo").unwrap().api_base_url.to_string();
    assert!(text.contains(&base), "{text}");
    assert!(text.contains("provider_request") && text.contains("Paging") && text.contains("429"), "{text}");
    assert!(text.ends_with("List my notes about {{cats}}"), "the task, as given: {text}");
    client.close().await;
    app.stop().await;
}

#[tokio::test]
async fn argument_values_are_inserted_as_data_and_never_reinterpreted() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    write_prompt_file(&app, "pair.toml", &text_prompt("pair", &[("x", true), ("y", false)], "x={{x}} y={{ y }}"));
    wait_for_prompts(client.peer(), |names| names.iter().any(|n| n == "pair")).await;

    let result = get(client.peer(), "pair", json!({"x": "{{y}}", "y": "Y"})).await.unwrap();
    let without_optional = get(client.peer(), "pair", json!({"x": "1"})).await.unwrap();

    assert_eq!(text_of(&result), "x={{y}} y=Y");
    assert_eq!(result.description.as_deref(), Some("Operator prompt pair"));
    assert_eq!(text_of(&without_optional), "x=1 y=");
    invalid_params(get(client.peer(), "pair", json!({"y": "Y"})).await);
    client.close().await;
    app.stop().await;
}

#[tokio::test]
async fn markdown_files_with_images_and_resources_are_served() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let dir = &app.state.core.config.prompts_dir;
    std::fs::create_dir_all(dir.join("img")).unwrap();
    std::fs::write(dir.join("img/pixel.png"), b"\x89PNG\r\n\x1a\nfake").unwrap();
    let rich = "name = \"rich\"\n\
        [[messages]]\nrole = \"user\"\ncontent = { type = \"image\", path = \"img/pixel.png\" }\n\
        [[messages]]\nrole = \"assistant\"\ncontent = { type = \"resource\", uri = \"https://example.com/guide\", mimeType = \"text/markdown\", text = \"# Guide\" }\n";
    write_prompt_file(&app, "rich.toml", rich);
    write_prompt_file(
        &app,
        "hello.md",
        "+++\ntitle = \"Hello\"\n[[arguments]]\nname = \"who\"\nrequired = true\n+++\nHello, {{who}}!\n",
    );
    wait_for_prompts(client.peer(), |n| n.iter().any(|n| n == "rich") && n.iter().any(|n| n == "hello")).await;

    let rich = get(client.peer(), "rich", json!({})).await.unwrap();
    let hello = get(client.peer(), "hello", json!({"who": "Ann"})).await.unwrap();

    let ContentBlock::Image(image) = &rich.messages[0].content else { panic!("an image: {rich:?}") };
    assert_eq!(image.mime_type, "image/png");
    use base64::Engine;
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(&image.data).unwrap(), b"\x89PNG\r\n\x1a\nfake");
    let ContentBlock::Resource(resource) = &rich.messages[1].content else { panic!("a resource: {rich:?}") };
    assert_eq!(resource.get_text(), "# Guide");
    assert_eq!(text_of(&hello), "Hello, Ann!");
    client.close().await;
    app.stop().await;
}

#[tokio::test]
async fn a_broken_file_is_skipped_and_the_rest_still_loads() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client = app.mcp_client(ALICE, ClientKind::Url).await;

    write_prompt_file(&app, "a_broken.toml", &text_prompt("broken", &[], "uses {{undeclared}}"));
    write_prompt_file(
        &app,
        "b_bad_role.toml",
        "[[messages]]\nrole = \"system\"\ncontent = { type = \"text\", text = \"x\" }\n",
    );
    write_prompt_file(&app, "c_good.toml", &text_prompt("good", &[], "fine"));
    let names = wait_for_prompts(client.peer(), |names| names.iter().any(|n| n == "good")).await;

    assert!(!names.iter().any(|n| n == "broken" || n == "b_bad_role"), "{names:?}");
    assert_eq!(names.len(), 4, "{names:?}");
    client.close().await;
    app.stop().await;
}

async fn next(rx: &mut mpsc::UnboundedReceiver<()>, wait: Duration) -> Option<()> {
    tokio::time::timeout(wait, rx.recv()).await.ok().flatten()
}

/// A client that records `notifications/prompts/list_changed`.
struct ListChangedRecorder(mpsc::UnboundedSender<()>);

impl ClientHandler for ListChangedRecorder {
    async fn on_prompt_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        let _ = self.0.send(());
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("prompt-watcher", "1.0.0"))
    }
}

#[tokio::test]
async fn adding_changing_and_removing_a_file_notifies_connected_clients() {
    // Arrange: a session whose relay runs (it made a request).
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(app.mcp_url()).auth_header(app.token_for(ALICE).await),
    );
    let service = ListChangedRecorder(tx).serve(transport).await.unwrap();
    assert_eq!(all_names(service.peer()).await.len(), 3);

    // Act + Assert: each effective change is one notification.
    write_prompt_file(&app, "added.md", "+++\n+++\nA new prompt");
    assert!(next(&mut rx, WATCH_WAIT).await.is_some(), "notified of the new file");
    assert!(all_names(service.peer()).await.contains(&"added".to_string()));
    assert!(next(&mut rx, Duration::from_millis(1500)).await.is_none(), "once per change");

    write_prompt_file(&app, "added.md", "+++\n+++\nA new prompt");
    assert!(next(&mut rx, Duration::from_millis(2500)).await.is_none(), "an identical catalogue is no change");

    std::fs::remove_file(app.state.core.config.prompts_dir.join("added.md")).unwrap();
    assert!(next(&mut rx, WATCH_WAIT).await.is_some(), "notified of the removal");
    assert_eq!(all_names(service.peer()).await.len(), 3);
    let _ = service.cancel().await;
    app.stop().await;
}

#[tokio::test]
async fn completion_suggests_provider_ids_and_refuses_unknown_references() {
    let app = spawn_app(Backend::Sqlite).await.unwrap();
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let peer = client.peer();

    let prompt = peer.complete_prompt_argument("connect_provider", "provider", "de", None).await.unwrap();
    let nothing = peer.complete_prompt_argument("use_provider_api", "provider", "zz", None).await.unwrap();
    let template =
        peer.complete_resource_argument("broker://connections/{provider}", "provider", "", None).await.unwrap();
    let context = CompletionContext::with_arguments([("provider".to_string(), "demo".to_string())].into());
    let scopes = peer.complete_prompt_argument("connect_provider", "scopes", "notes:", Some(context)).await.unwrap();
    let unknown_prompt = peer.complete_prompt_argument("no_such_prompt", "provider", "", None).await;
    let unknown_argument = peer.complete_prompt_argument("connect_provider", "nope", "", None).await;
    let unknown_template = peer.complete_resource_argument("broker://elsewhere/{x}", "x", "", None).await;

    assert_eq!(prompt.values, ["demo"]);
    assert_eq!((prompt.total, prompt.has_more), (Some(1), Some(false)));
    assert!(nothing.values.is_empty());
    assert_eq!(template.values, ["demo"]);
    assert_eq!(scopes.values, ["notes:read", "notes:write"]);
    invalid_params(unknown_prompt);
    invalid_params(unknown_argument);
    invalid_params(unknown_template);
    client.close().await;
    app.stop().await;
}

async fn connections_are_reviewed_and_completed_for_their_owner_only(app: &TestApp) {
    // Arrange: Alice connects her demo account; Bob has nothing; an operator prompt takes an
    // `account` argument.
    let alice = app.connected_client(ALICE).await;
    let bob = app.mcp_client(BOB, ClientKind::Url).await;
    write_prompt_file(
        app,
        "switch.toml",
        &text_prompt("switch", &[("provider", true), ("account", true)], "Use {{account}} at {{provider}}"),
    );
    wait_for_prompts(alice.peer(), |names| names.iter().any(|n| n == "switch")).await;
    let user = app.user_id(ALICE).await;
    let grant = app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().unwrap();
    let owner = format!("{user}/demo");
    let open = |sealed: &[u8], column| {
        let ctx = SealContext { table: "grants", column, row_id: &grant.id, owner: &owner };
        String::from_utf8(app.state.core.sealer.open(sealed, ctx).unwrap()).unwrap()
    };
    let secrets = [
        open(&grant.access_token_sealed, "access_token"),
        open(grant.refresh_token_sealed.as_deref().unwrap(), "refresh_token"),
        app.state.core.providers.find("demo").unwrap().client_secret.as_ref().unwrap().expose_secret().to_owned(),
    ];
    let account = grant.account_label.clone().expect("the demo provider names the account");

    // Act
    let alice_review = text_of(&get(alice.peer(), "review_connections", json!({})).await.unwrap());
    let bob_review = text_of(&get(bob.peer(), "review_connections", json!({})).await.unwrap());
    let demo = || Some(CompletionContext::with_arguments([("provider".to_string(), "demo".to_string())].into()));
    let complete = |peer: &Peer<RoleClient>, context| {
        let peer = peer.clone();
        async move { peer.complete_prompt_argument("switch", "account", "", context).await.unwrap().values }
    };
    let alice_labels = complete(alice.peer(), demo()).await;
    let alice_any = complete(alice.peer(), None).await;
    let alice_other = complete(
        alice.peer(),
        Some(CompletionContext::with_arguments([("provider".to_string(), "elsewhere".to_string())].into())),
    )
    .await;
    let bob_labels = complete(bob.peer(), demo()).await;

    // Assert
    assert!(alice_review.contains("\"provider\": \"demo\""), "{alice_review}");
    assert!(alice_review.contains(&account) && alice_review.contains("\"status\": \"active\""), "{alice_review}");
    assert!(alice_review.contains("disconnect_account"), "{alice_review}");
    for secret in &secrets {
        assert!(!alice_review.contains(secret.as_str()), "a secret leaked into the prompt");
    }
    assert!(bob_review.contains("no connections") && !bob_review.contains(&account), "{bob_review}");
    assert_eq!(alice_labels, [account]);
    assert_eq!(alice_any, alice_labels, "without a provider: all of her accounts");
    assert!(alice_other.is_empty(), "{alice_other:?}");
    assert!(bob_labels.is_empty(), "never another user's accounts: {bob_labels:?}");
    alice.close().await;
    bob.close().await;
}
on_both_backends!(
    connections_are_reviewed_and_completed_for_their_owner,
    connections_are_reviewed_and_completed_for_their_owner_only
);

async fn completions_are_rate_limited_per_user_across_her_sessions(app: &TestApp) {
    use oauth_broker::mcp::completion::{PER_WINDOW, WINDOW_SECONDS};
    let first = app.mcp_client(ALICE, ClientKind::Url).await;
    let second = app.mcp_client(ALICE, ClientKind::Url).await;
    let bob = app.mcp_client(BOB, ClientKind::Url).await;
    let complete = |client: &McpClient| {
        let peer = client.peer().clone();
        async move { peer.complete_prompt_argument("connect_provider", "provider", "d", None).await }
    };
    // A burst spread over two sessions of one user: together they get the budget, no more.
    for i in 0..PER_WINDOW {
        let client = if i % 2 == 0 { &first } else { &second };
        assert_eq!(complete(client).await.unwrap().values, ["demo"], "completion {i}");
    }
    let refused = complete(&second).await.unwrap_err().to_string();
    assert!(refused.contains("slow down"), "{refused}");
    assert!(complete(&first).await.is_err(), "a new session buys no more");
    assert!(complete(&app.mcp_client(ALICE, ClientKind::Url).await).await.is_err());
    // Another user has her own budget.
    assert_eq!(complete(&bob).await.unwrap().values, ["demo"]);
    // The window slides: later the user may complete again.
    app.clock.advance(WINDOW_SECONDS);
    assert_eq!(complete(&first).await.unwrap().values, ["demo"]);
    first.close().await;
    second.close().await;
    bob.close().await;
}
on_both_backends!(completion_budget_per_user, completions_are_rate_limited_per_user_across_her_sessions);
