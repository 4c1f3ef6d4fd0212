//! Form-mode elicitation end to end: the scope question in `connect_account`, choosing among
//! several accounts at one provider, confirming `disconnect_account`, each with accept /
//! decline / cancel; invalid answers refused; clients without form mode (or with URL mode
//! only) never sent a form.

use rmcp::model::{CallToolResult, ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Value, json};

use crate::helpers::{ALICE, Backend, ClientKind, EmptyDatabase, McpClient, TestApp};
use crate::on_both_backends;
use oauth_broker::store::grants::{Grants, NewGrant};

fn text_of(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join("\n")
}

fn accept(content: Value) -> ElicitResult {
    ElicitResult::new(ElicitationAction::Accept).with_content(content)
}

fn answer(action: ElicitationAction) -> ElicitResult {
    ElicitResult::new(action)
}

async fn call(client: &McpClient, tool: &str, arguments: Value) -> CallToolResult {
    client.call(tool, arguments).await.unwrap()
}

/// Connects another demo account for Alice through the browser, choosing `account` at the
/// demo provider (a client without elicitation gets the link as text).
async fn connect_demo_account(app: &TestApp, account: &str) {
    let client = app.mcp_client(ALICE, ClientKind::NoElicitation).await;
    let result = call(&client, "connect_account", json!({"provider": "demo", "account": account})).await;
    let text = text_of(&result);
    let start = text.find("http://").expect("a connect link");
    let url = text[start..].split_whitespace().next().unwrap().to_owned();
    let browser = app.browser();
    assert_eq!(app.approve_in_browser_as(&browser, &url, ALICE, account).await.status(), 200);
    client.close().await;
}

async fn accounts(app: &TestApp) -> Vec<(String, String)> {
    let user = app.user_id(ALICE).await;
    let grants = app.state.core.store.grants().at(&user, "demo").await.unwrap();
    grants.into_iter().map(|g| (g.account_label.unwrap_or_default(), g.scopes.to_space_separated())).collect()
}

async fn connecting_again_asks_which_scopes_and_honours_accept_decline_and_cancel(app: &TestApp) {
    // Arrange: connected once with the default scopes, as "work".
    connect_demo_account(app, "work").await;
    let client = std::sync::Arc::new(app.mcp_client(ALICE, ClientKind::Url).await);
    let authorizations_before = app.state.core.store.authorizations().all(100).await.unwrap().len();

    // Decline: nothing connected, no link, nothing changed.
    client.answer_forms([answer(ElicitationAction::Decline)]);
    let declined = call(&client, "connect_account", json!({"provider": "demo"})).await;
    let (message, schema) = client.next_form_elicitation().await;
    assert!(message.contains("Demo Provider"), "{message}");
    let scopes = &schema["properties"]["scopes"];
    assert_eq!(scopes["type"], "array");
    assert_eq!(scopes["items"]["anyOf"].as_array().unwrap().len(), 3, "{scopes}");
    assert_eq!(scopes["default"], json!(["notes:read", "profile"]), "what they hold and the defaults are ticked");
    assert_eq!(schema["properties"]["account"]["default"], "work");
    assert_eq!(declined.is_error, Some(true));
    assert!(text_of(&declined).contains("declined"), "{}", text_of(&declined));
    assert!(client.no_elicitation_was_sent().await, "no link after a decline");

    // Cancel: the same, told apart.
    client.answer_forms([answer(ElicitationAction::Cancel)]);
    let cancelled = call(&client, "connect_account", json!({"provider": "demo"})).await;
    client.next_form_elicitation().await;
    assert_eq!(cancelled.is_error, Some(true));
    assert!(text_of(&cancelled).contains("cancelled"), "{}", text_of(&cancelled));

    // Accepted but invalid (a scope that was not offered, a wrong type): refused, never used.
    for content in [json!({"account": "work", "scopes": ["admin"]}), json!({"account": "work", "scopes": "profile"})] {
        client.answer_forms([accept(content.clone())]);
        let invalid = call(&client, "connect_account", json!({"provider": "demo"})).await;
        client.next_form_elicitation().await;
        assert_eq!(invalid.is_error, Some(true), "{content}");
        assert!(text_of(&invalid).contains("could not be used"), "{}", text_of(&invalid));
        assert!(client.no_elicitation_was_sent().await, "no link for an invalid answer");
    }
    let authorizations_after = app.state.core.store.authorizations().all(100).await.unwrap().len();
    assert_eq!(authorizations_before, authorizations_after, "no connect attempt was opened");
    assert_eq!(accounts(app).await, [("work".to_owned(), "notes:read profile".to_owned())]);

    // Accept: the chosen scopes are requested for the chosen account, which is updated.
    client.answer_forms([accept(json!({"account": "work", "scopes": ["profile", "notes:read", "notes:write"]}))]);
    let call_task = tokio::spawn({
        let client = client.clone();
        async move { client.call("connect_account", json!({"provider": "demo"})).await }
    });
    client.next_form_elicitation().await;
    let (url, _) = client.next_url_elicitation().await;
    let browser = app.browser();
    assert_eq!(app.approve_in_browser_as(&browser, &url, ALICE, "work").await.status(), 200);
    let connected = call_task.await.unwrap().unwrap();
    assert_ne!(connected.is_error, Some(true), "{}", text_of(&connected));
    assert_eq!(connected.structured_content.as_ref().unwrap()["account"], "work");
    assert_eq!(accounts(app).await, [("work".to_owned(), "notes:read notes:write profile".to_owned())]);

    // Scopes named by the caller: no question.
    let named = call(&client, "connect_account", json!({"provider": "demo", "scopes": ["profile"]})).await;
    assert_ne!(named.is_error, Some(true), "{}", text_of(&named));
    assert!(client.no_elicitation_was_sent().await);
}
on_both_backends!(scope_question, connecting_again_asks_which_scopes_and_honours_accept_decline_and_cancel);

async fn with_several_accounts_tools_ask_which_one(app: &TestApp) {
    // Arrange: two demo accounts.
    connect_demo_account(app, "work").await;
    connect_demo_account(app, "home").await;
    assert_eq!(accounts(app).await.len(), 2, "a second account adds a grant");
    let client = app.mcp_client(ALICE, ClientKind::Url).await;

    // list_connections: one entry per account.
    let listed = call(&client, "list_connections", json!({})).await.structured_content.unwrap();
    let demo: Vec<&Value> =
        listed["connections"].as_array().unwrap().iter().filter(|c| c["provider"] == "demo").collect();
    let names: Vec<&str> = demo.iter().map(|c| c["account"].as_str().unwrap()).collect();
    assert_eq!(names, ["home", "work"]);

    // Accept: the request goes out as the chosen account.
    client.answer_forms([accept(json!({"account": "home"}))]);
    let me = call(&client, "provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
    let (_, schema) = client.next_form_elicitation().await;
    let options = schema["properties"]["account"]["oneOf"].as_array().unwrap().clone();
    let values: Vec<&str> = options.iter().map(|o| o["const"].as_str().unwrap()).collect();
    assert_eq!(values, ["home", "work"], "a titled single-select over the accounts, no “another” here");
    assert_eq!(schema["required"], json!(["account"]));
    assert_eq!(me.structured_content.as_ref().unwrap()["body"]["account"], "home", "{}", text_of(&me));

    // Decline / cancel / an answer that is not an option: no request.
    for (reply, expected) in [
        (answer(ElicitationAction::Decline), "declined"),
        (answer(ElicitationAction::Cancel), "Cancelled"),
        (accept(json!({"account": "someone-else"})), "not one of the options"),
    ] {
        client.answer_forms([reply]);
        let result =
            call(&client, "provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
        client.next_form_elicitation().await;
        assert_eq!(result.is_error, Some(true));
        assert!(result.structured_content.is_none(), "nothing was sent to the provider");
        assert!(text_of(&result).contains(expected), "{}", text_of(&result));
    }

    // Named: no question.
    let work = call(
        &client,
        "provider_request",
        json!({"provider": "demo", "method": "GET", "path": "/me", "account": "work"}),
    )
    .await;
    assert_eq!(work.structured_content.unwrap()["body"]["account"], "work");
    assert!(client.no_elicitation_was_sent().await);

    // An empty `elicitation: {}` counts as form mode too.
    let form_only = app.mcp_client(ALICE, ClientKind::FormOnly).await;
    form_only.answer_forms([accept(json!({"account": "work"}))]);
    let me = call(&form_only, "provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
    form_only.next_form_elicitation().await;
    assert_eq!(me.structured_content.unwrap()["body"]["account"], "work");

    // connect_account offers the accounts and “another”.
    client.answer_forms([answer(ElicitationAction::Cancel)]);
    call(&client, "connect_account", json!({"provider": "demo"})).await;
    let (_, schema) = client.next_form_elicitation().await;
    assert_eq!(schema["properties"]["account"]["oneOf"].as_array().unwrap().len(), 3, "{schema}");
}
on_both_backends!(account_choice, with_several_accounts_tools_ask_which_one);

async fn disconnecting_asks_for_confirmation_in_form_mode(app: &TestApp) {
    connect_demo_account(app, "work").await;
    connect_demo_account(app, "home").await;
    let client = app.mcp_client(ALICE, ClientKind::Url).await;

    // Decline, cancel, or an unticked box: nothing revoked.
    for reply in [
        answer(ElicitationAction::Decline),
        answer(ElicitationAction::Cancel),
        accept(json!({"confirm": false})),
        accept(json!({"confirm": "yes"})),
    ] {
        client.answer_forms([reply]);
        let result = call(&client, "disconnect_account", json!({"provider": "demo", "account": "work"})).await;
        let (message, schema) = client.next_form_elicitation().await;
        assert!(message.contains("“work”"), "{message}");
        assert_eq!(schema["properties"]["confirm"]["type"], "boolean");
        assert_eq!(result.is_error, Some(true));
        assert!(text_of(&result).contains("Nothing was disconnected"), "{}", text_of(&result));
        assert_eq!(accounts(app).await.len(), 2);
    }

    // Accept: that account only is revoked.
    client.answer_forms([accept(json!({"confirm": true}))]);
    let done = call(&client, "disconnect_account", json!({"provider": "demo", "account": "work"})).await;
    client.next_form_elicitation().await;
    assert_ne!(done.is_error, Some(true), "{}", text_of(&done));
    let left: Vec<String> = accounts(app).await.into_iter().map(|(name, _)| name).collect();
    assert_eq!(left, ["home"]);

    // Several accounts and none named: one form asks which and confirms.
    connect_demo_account(app, "work").await;
    client.answer_forms([accept(json!({"account": "home", "confirm": true}))]);
    let done = call(&client, "disconnect_account", json!({"provider": "demo"})).await;
    let (_, schema) = client.next_form_elicitation().await;
    assert!(schema["properties"]["account"]["oneOf"].is_array() && schema["properties"]["confirm"].is_object());
    assert_ne!(done.is_error, Some(true), "{}", text_of(&done));
    let left: Vec<String> = accounts(app).await.into_iter().map(|(name, _)| name).collect();
    assert_eq!(left, ["work"]);
}
on_both_backends!(disconnect_confirmation, disconnecting_asks_for_confirmation_in_form_mode);

async fn clients_without_form_mode_get_defaults_or_a_clear_message_and_never_a_form(app: &TestApp) {
    connect_demo_account(app, "work").await;
    let url_only = app.mcp_client(ALICE, ClientKind::UrlOnly).await;
    let none = app.mcp_client(ALICE, ClientKind::NoElicitation).await;

    for client in [&url_only, &none] {
        // One account, no scopes named: the defaults, no question.
        let connected = call(client, "connect_account", json!({"provider": "demo"})).await;
        assert_ne!(connected.is_error, Some(true), "{}", text_of(&connected));
        assert_eq!(connected.structured_content.unwrap()["account"], "work");
    }

    // Several accounts, none named: an isError that lists them and asks for `account`.
    connect_demo_account(app, "home").await;
    for client in [&url_only, &none] {
        for (tool, arguments) in [
            ("provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})),
            ("connect_account", json!({"provider": "demo"})),
            ("disconnect_account", json!({"provider": "demo"})),
        ] {
            let result = call(client, tool, arguments).await;
            assert_eq!(result.is_error, Some(true), "{tool}");
            let text = text_of(&result);
            assert!(text.contains("“home”") && text.contains("“work”") && text.contains("`account`"), "{tool}: {text}");
        }
        let unknown = call(
            client,
            "provider_request",
            json!({"provider": "demo", "method": "GET", "path": "/me", "account": "x"}),
        )
        .await;
        assert_eq!(unknown.is_error, Some(true));
        assert!(text_of(&unknown).contains("no Demo Provider account named"), "{}", text_of(&unknown));
    }
    assert_eq!(accounts(app).await.len(), 2, "nothing was disconnected without an account named");

    // Named: proceeds without asking (the tool is annotated destructive; the client confirms).
    let done = call(&url_only, "disconnect_account", json!({"provider": "demo", "account": "home"})).await;
    assert_ne!(done.is_error, Some(true), "{}", text_of(&done));
    assert_eq!(accounts(app).await.len(), 1);

    // A URL-only client was never sent a form (clients answer an undeclared mode with -32602).
    let sent = url_only.drain_elicitations().await;
    assert!(
        sent.iter().all(|e| matches!(e, ElicitRequestParams::UrlElicitationParams { .. })),
        "only URL mode to a URL-only client: {sent:?}"
    );
    assert!(none.no_elicitation_was_sent().await);
}
on_both_backends!(no_form_mode, clients_without_form_mode_get_defaults_or_a_clear_message_and_never_a_form);

// ---- several accounts per provider: the data model ----

fn legacy_grant_id(user_id: &str, provider: &str) -> String {
    format!("g_{}", &oauth_broker::crypto::sha256_hex(&format!("{user_id}\0{provider}"))[..32])
}

/// Migration 0002 changes the grants key from (user, provider) to (user, provider, account):
/// existing rows keep their data and their ids (which their sealed tokens are bound to).
async fn migration_0002_keeps_grants_and_their_ids(backend: Backend) {
    use oauth_broker::domain::Scopes;
    use oauth_broker::store::Store;
    use oauth_broker::store::grants::SealedTokens;

    let Some(db) = EmptyDatabase::create(backend).await else { return };
    let store = Store::connect(&db.url).await.unwrap();
    // Arrange: the schema as of 0001, holding grants in the old shape.
    let folder = if backend == Backend::Sqlite { "sqlite" } else { "postgres" };
    let only_first = tempfile::tempdir().unwrap();
    let source = format!("{}/migrations/{folder}/0001_initial.sql", env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(source, only_first.path().join("0001_initial.sql")).unwrap();
    sqlx::migrate::Migrator::new(only_first.path()).await.unwrap().run(store.pool()).await.unwrap();
    // Users as 0001 stored them (raw SQL: the store's queries read columns added later).
    let (alice, bob) = ("user-alice".to_owned(), "user-bob".to_owned());
    for (id, name) in [(&alice, "alice"), (&bob, "bob")] {
        sqlx::query(
            "INSERT INTO users (id, issuer, subject, username, password_hash, created_at) VALUES ($1, 'https://issuer.example', $1, $2, 'hash', 1)",
        )
        .bind(id)
        .bind(name)
        .execute(store.pool())
        .await
        .unwrap();
    }
    for (user, label) in [(&alice, None), (&bob, Some("bob-at-demo"))] {
        sqlx::query(
            "INSERT INTO grants (id, user_id, provider, account_label, scopes, access_token_sealed, refresh_token_sealed, key_id, expires_at, status, version, refresh_lease_until, created_at, updated_at) \
             VALUES ($1, $2, 'demo', $3, 'profile', $4, NULL, 'k1', NULL, 'active', 3, NULL, 10, 20)",
        )
        .bind(legacy_grant_id(user, "demo"))
        .bind(user)
        .bind(label)
        .bind(vec![1u8, 2, 3])
        .execute(store.pool())
        .await
        .unwrap();
    }

    store.close().await;

    // Act: what `App::build` and `oauth-broker migrate` do.
    let store = Store::connect(&db.url).await.unwrap();
    store.migrate().await.unwrap();

    // Assert: same rows, same ids; an account without a name reads as None.
    let alices = store.grants().for_user(&alice).await.unwrap();
    assert_eq!(alices.len(), 1);
    assert_eq!(alices[0].id, legacy_grant_id(&alice, "demo"));
    assert_eq!(
        (alices[0].account_label.as_deref(), alices[0].version, alices[0].scopes.to_space_separated().as_str()),
        (None, 3, "profile")
    );
    assert_eq!(alices[0].access_token_sealed, vec![1u8, 2, 3]);
    let bobs = store.grants().for_user(&bob).await.unwrap();
    assert_eq!(
        (bobs[0].id.clone(), bobs[0].account_label.as_deref()),
        (legacy_grant_id(&bob, "demo"), Some("bob-at-demo"))
    );
    // A second account is a second row; the old row still updates in place under its own id,
    // and never under another id.
    let tokens = SealedTokens {
        access_token_sealed: vec![9],
        refresh_token_sealed: None,
        key_id: "k1".into(),
        expires_at: None,
        scopes: Scopes::parse(["profile"]).unwrap(),
    };
    let second = Grants::id_for(&alice, "demo", "second");
    assert!(
        store
            .grants()
            .upsert(
                &NewGrant {
                    id: &second,
                    user_id: &alice,
                    provider: "demo",
                    account_label: Some("second"),
                    tokens: &tokens,
                    organization: &oauth_broker::domain::OrganizationId::default_organization(),
                    app_id: None,
                },
                30
            )
            .await
            .unwrap()
    );
    assert_eq!(store.grants().at(&alice, "demo").await.unwrap().len(), 2);
    assert!(
        store
            .grants()
            .upsert(
                &NewGrant {
                    id: &legacy_grant_id(&alice, "demo"),
                    user_id: &alice,
                    provider: "demo",
                    account_label: None,
                    tokens: &tokens,
                    organization: &oauth_broker::domain::OrganizationId::default_organization(),
                    app_id: None,
                },
                31
            )
            .await
            .unwrap()
    );
    assert!(
        !store
            .grants()
            .upsert(
                &NewGrant {
                    id: "g_other",
                    user_id: &alice,
                    provider: "demo",
                    account_label: None,
                    tokens: &tokens,
                    organization: &oauth_broker::domain::OrganizationId::default_organization(),
                    app_id: None
                },
                32
            )
            .await
            .unwrap()
    );
    let unnamed = store.grants().for_account(&alice, "demo", "", None).await.unwrap().unwrap();
    assert_eq!(
        (unnamed.id, unnamed.version, unnamed.access_token_sealed),
        (legacy_grant_id(&alice, "demo"), 4, vec![9])
    );
    store.close().await;
    db.drop_now().await;
}

#[tokio::test]
async fn migration_0002_keeps_grants_and_their_ids_on_sqlite() {
    migration_0002_keeps_grants_and_their_ids(Backend::Sqlite).await;
}

#[tokio::test]
async fn migration_0002_keeps_grants_and_their_ids_on_postgres() {
    migration_0002_keeps_grants_and_their_ids(Backend::Postgres).await;
}

/// A grant stored before 0002 has an id of the older derivation, and its tokens are sealed for
/// that id: reconnecting the same account must update that row (sealing for its id), not add one.
async fn reconnecting_an_account_from_before_several_accounts_keeps_its_row(app: &TestApp) {
    use oauth_broker::crypto::SealContext;

    connect_demo_account(app, "demo-user").await;
    let user = app.user_id(ALICE).await;
    let owner = format!("{user}/demo");
    let grant = app.state.core.store.grants().latest(&user, "demo", None).await.unwrap().unwrap();
    let ctx = |row_id| SealContext { table: "grants", column: "access_token", row_id, owner: &owner };
    let refresh_ctx = |row_id| SealContext { table: "grants", column: "refresh_token", row_id, owner: &owner };
    let access = app.state.core.sealer.open(&grant.access_token_sealed, ctx(&grant.id)).unwrap();
    let refresh =
        app.state.core.sealer.open(grant.refresh_token_sealed.as_ref().unwrap(), refresh_ctx(&grant.id)).unwrap();
    // Turn it into a row as 0001 would have written it (consents came later, in 0004).
    let legacy = legacy_grant_id(&user, "demo");
    sqlx::query("DELETE FROM client_consents WHERE grant_id = $1")
        .bind(&grant.id)
        .execute(app.state.core.store.pool())
        .await
        .unwrap();
    sqlx::query("UPDATE grants SET id = $1, access_token_sealed = $2, refresh_token_sealed = $3 WHERE id = $4")
        .bind(&legacy)
        .bind(app.state.core.sealer.seal(&access, ctx(&legacy)))
        .bind(app.state.core.sealer.seal(&refresh, refresh_ctx(&legacy)))
        .bind(&grant.id)
        .execute(app.state.core.store.pool())
        .await
        .unwrap();

    // Act: connect the same account again, with one more scope.
    let client = app.mcp_client(ALICE, ClientKind::NoElicitation).await;
    let arguments =
        json!({"provider": "demo", "account": "demo-user", "scopes": ["profile", "notes:read", "notes:write"]});
    let text = text_of(&call(&client, "connect_account", arguments).await);
    let start = text.find("http://").expect("a connect link");
    let url = text[start..].split_whitespace().next().unwrap().to_owned();
    assert_eq!(app.approve_in_browser_as(&app.browser(), &url, ALICE, "demo-user").await.status(), 200);

    // Assert: one row, the old id, the new scope, and its token opens.
    let grants = app.state.core.store.grants().at(&user, "demo").await.unwrap();
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0].id, legacy);
    assert!(grants[0].scopes.iter().any(|s| s == "notes:write"));
    let me = call(&client, "provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
    assert_eq!(me.structured_content.unwrap()["status"], 200);
}
on_both_backends!(legacy_grant_reconnect, reconnecting_an_account_from_before_several_accounts_keeps_its_row);

async fn a_first_connection_without_scopes_asks_which_scopes(app: &TestApp) {
    let client = std::sync::Arc::new(app.mcp_client(ALICE, ClientKind::Url).await);
    client.answer_forms([accept(json!({"scopes": ["profile", "notes:write"]}))]);
    let call_task = tokio::spawn({
        let client = client.clone();
        async move { client.call("connect_account", json!({"provider": "demo"})).await }
    });
    let (_, schema) = client.next_form_elicitation().await;
    assert_eq!(schema["properties"]["scopes"]["type"], "array", "a multi-select of scopes");
    assert!(schema["properties"].get("account").is_none(), "no account question before any account exists");
    let (url, _) = client.next_url_elicitation().await;
    let browser = app.browser();
    assert_eq!(app.approve_in_browser(&browser, &url, ALICE).await.status(), 200);
    let connected = call_task.await.unwrap().unwrap();
    assert_ne!(connected.is_error, Some(true), "{}", text_of(&connected));
    assert_eq!(accounts(app).await, [("demo-user".to_owned(), "notes:write profile".to_owned())]);
}
on_both_backends!(first_scope_question, a_first_connection_without_scopes_asks_which_scopes);
