//! Gateway mode's `mcp-oauth` servers (issue 26): a server protected by the MCP authorization
//! spec, behind the broker. Three parties, each real:
//! - the authorization server: a second broker (its own database, users and signing keys),
//!   which knows the server as a resource (`admin services add --resource`);
//! - the server: `examples/upstream_server.rs --require-oauth <issuer>` in its own process,
//!   which serves RFC 9728 metadata, challenges with it, and accepts only that issuer's JWTs
//!   for its own URL;
//! - the broker in front, registered by the admin CLI (another process), which discovers the
//!   authorization server from the server's 401 and registers itself there (RFC 7591: its
//!   public URL is plain http, so it does not offer a client ID metadata document by itself;
//!   the last test names its document as the client ID, which the authorization server fetches).

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::gateway::{Upstream, served, servers_cli, servers_ok};
use crate::helpers::token_api::{ServiceOptions, register_service, url_elicitation_required};
use crate::helpers::*;

/// The server, with `authorization`'s broker as its authorization server (which learns it
/// as a resource), registered in front of `front` as `name`.
async fn protected_server(front: &TestApp, authorization: &TestApp, name: &str) -> Upstream {
    let upstream = Upstream::start(&["--require-oauth", &authorization.address], None).await;
    let options = ServiceOptions { resource: Some(&upstream.mcp_url), ..Default::default() };
    register_service(authorization, name, &["demo"], options).await;
    let added = servers_ok(front, &["add", name, "--url", &upstream.mcp_url, "--auth", "mcp-oauth", "--json"]).await;
    let added: Value = serde_json::from_str(&added).unwrap();
    assert_eq!(added["auth"], "mcp_oauth");
    assert_eq!(added["issuer"].as_str().unwrap().trim_end_matches('/'), authorization.address);
    assert_eq!(added["resource"], upstream.mcp_url.as_str());
    assert_eq!(added["registration"], "dynamic", "{added}");
    let prefix = format!("{}_", name.replace('-', "_"));
    eventually("the broker serves the new server", Duration::from_secs(10), || async { served(front, &prefix).await })
        .await;
    upstream
}

/// The user's whole browser leg for `connect_url`: the front broker's consent page, then the
/// authorization server's sign-in and consent, back to the front broker's callback. Two
/// browsers: both brokers are on 127.0.0.1, where cookies do not tell ports apart.
async fn connect_in_browser(front: &TestApp, authorization: &TestApp, connect_url: &str, resource: &str) {
    let browser = front.browser();
    let path = connect_url.strip_prefix(&front.address).expect("the front broker's own page");
    if browser.get(connect_url).send().await.unwrap().status() == 303 {
        assert_eq!(front.sign_in(&browser, ALICE, path).await.status(), 303);
    }
    let consent = browser.get(connect_url).send().await.unwrap();
    assert_eq!(consent.status(), 200, "the front broker's consent page");
    let csrf = hidden_field(&consent.text().await.unwrap(), "csrf_token").unwrap();
    let approved =
        browser.post(connect_url).form(&[("csrf_token", csrf.as_str()), ("action", "approve")]).send().await.unwrap();
    assert_eq!(approved.status(), 303, "on to the server's authorization server");
    let authorize = location(&approved);
    assert!(authorize.starts_with(&authorization.url("/authorize?")), "{authorize}");
    let query: Vec<(String, String)> = url::Url::parse(&authorize).unwrap().query_pairs().into_owned().collect();
    let param = |name: &str| query.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    assert_eq!(param("resource").as_deref(), Some(resource), "RFC 8707: the token is for the server");
    assert_eq!(param("code_challenge_method").as_deref(), Some("S256"));

    let at_server = authorization.browser();
    let first = at_server.get(&authorize).send().await.unwrap();
    assert_eq!(first.status(), 303, "sign in at the authorization server first");
    let login = url::Url::parse(&authorization.url(&location(&first))).unwrap();
    let next = login.query_pairs().find(|(k, _)| k == "next").unwrap().1.into_owned();
    assert_eq!(authorization.sign_in(&at_server, ALICE, &next).await.status(), 303);
    let page = at_server.get(authorization.url(&next)).send().await.unwrap();
    assert_eq!(page.status(), 200, "the authorization server's consent page");
    let mut form = hidden_fields(&page.text().await.unwrap());
    form.push(("action".into(), "approve".into()));
    let back = at_server.post(authorization.url("/authorize")).form(&form).send().await.unwrap();
    assert_eq!(back.status(), 302, "back to the front broker");
    let callback = location(&back);
    assert!(callback.starts_with(&front.url("/oauth/callback/")), "{callback}");
    assert_eq!(front.land(&browser, &callback).await.status(), 200);
}

fn whoami(result: &rmcp::model::CallToolResult) -> (String, String) {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let out = result.structured_content.as_ref().unwrap();
    (out["account"].as_str().unwrap().to_owned(), out["credential_sha256"].as_str().unwrap().to_owned())
}

async fn a_server_behind_its_own_authorization_server_is_discovered_connected_called_and_refreshed(
    front: &TestApp,
    authorization: &TestApp,
) {
    // Arrange: the server behind the front broker; alice's MCP client talks to the front only.
    let upstream = protected_server(front, authorization, "secure").await;
    let client = front.mcp_client(ALICE, ClientKind::Url).await;

    // Act: the first call gets the front broker's own link; alice approves at both brokers.
    let (_, url) = url_elicitation_required(client.call("secure_connect", json!({})).await);
    assert!(url.starts_with(&front.url("/connect/")), "the broker's own page: {url}");
    connect_in_browser(front, authorization, &url, &upstream.mcp_url).await;
    let connected = client.call("secure_connect", json!({})).await.unwrap();
    assert_ne!(connected.is_error, Some(true), "{connected:?}");

    // Assert: the server accepted a token for its own audience, naming alice as the
    // authorization server knows her.
    let (account, credential) = whoami(&client.call("secure_whoami", json!({})).await.unwrap());
    assert_eq!(account, authorization.user_id(ALICE).await);
    let alice = front.user_id(ALICE).await;
    let grants = front.state.core.store.grants().for_user(&alice).await.unwrap();
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0].provider, "mcp-secure", "kept like any provider's grant");

    // A token of the same authorization server for another audience (its own MCP endpoint) is
    // refused by the server.
    let elsewhere = authorization.token_for(ALICE).await;
    let refused = reqwest::Client::new()
        .post(&upstream.mcp_url)
        .bearer_auth(&elsewhere)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let challenge = refused.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(challenge.contains("resource_metadata=") && challenge.contains("invalid_token"), "{challenge}");

    // Act: time passes on the front broker beyond the access token's life.
    front.clock.advance(2 * 3600);

    // Assert: the next call carries a refreshed token, still alice's, still accepted.
    let (again, refreshed) = whoami(&client.call("secure_whoami", json!({})).await.unwrap());
    assert_eq!(again, account);
    assert_ne!(refreshed, credential, "a new access token from the authorization server");
    let grant = front.state.core.store.grants().for_user(&alice).await.unwrap().remove(0);
    assert!(grant.version > grants[0].version, "the grant was refreshed");

    client.close().await;
    upstream.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_oauth_sqlite() {
    let authorization = spawn_app(Backend::Sqlite).await.unwrap();
    let front = spawn_app(Backend::Sqlite).await.unwrap();
    a_server_behind_its_own_authorization_server_is_discovered_connected_called_and_refreshed(&front, &authorization)
        .await;
    front.stop().await;
    authorization.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_oauth_postgres() {
    let Some(authorization) = spawn_app(Backend::Postgres).await else { return };
    let Some(front) = spawn_app(Backend::Postgres).await else { return };
    a_server_behind_its_own_authorization_server_is_discovered_connected_called_and_refreshed(&front, &authorization)
        .await;
    front.stop().await;
    authorization.stop().await;
}

/// `authorization`'s broker moved into a process of its own: its in-process server stops, and
/// `oauth-broker serve` takes over its address, database and key (so its users, signing keys
/// and registered resources stay), as a separate deployment would run it.
async fn serve_in_own_process(authorization: &mut TestApp) -> tokio::process::Child {
    authorization.stop_serving().await;
    let listen = authorization.address.strip_prefix("http://").unwrap().to_owned();
    let child = crate::helpers::cli::broker_for(authorization)
        .args(["serve", "--listen", &listen])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let metadata = authorization.url("/.well-known/oauth-authorization-server");
    eventually("the authorization server's process answers", Duration::from_secs(30), || async {
        reqwest::get(&metadata).await.is_ok_and(|response| response.status().is_success())
    })
    .await;
    child
}

async fn with_the_authorization_server_in_its_own_process(backend: Backend) {
    let Some(mut authorization) = spawn_app(backend).await else { return };
    let Some(front) = spawn_app(backend).await else { return };
    let mut process = serve_in_own_process(&mut authorization).await;
    a_server_behind_its_own_authorization_server_is_discovered_connected_called_and_refreshed(&front, &authorization)
        .await;
    let _ = process.kill().await;
    front.stop().await;
    authorization.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_oauth_authorization_server_process_sqlite() {
    with_the_authorization_server_in_its_own_process(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_oauth_authorization_server_process_postgres() {
    with_the_authorization_server_in_its_own_process(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_not_protected_or_names_another_resource_is_refused_at_add() {
    let front = spawn_app(Backend::Sqlite).await.unwrap();
    // An open server answers without a credential: mcp-oauth is the wrong kind.
    let open = Upstream::start(&[], None).await;
    let output = servers_cli(&front, &["add", "open", "--url", &open.mcp_url, "--auth", "mcp-oauth"], None).await;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not protected by MCP authorization"), "{stderr}");
    // Flags of other kinds are refused before anything is fetched.
    let output =
        servers_cli(&front, &["add", "open", "--url", &open.mcp_url, "--auth", "mcp-oauth", "--header", "X-Key"], None)
            .await;
    assert!(String::from_utf8_lossy(&output.stderr).contains("--header goes only with"));
    let output =
        servers_cli(&front, &["add", "open", "--url", &open.mcp_url, "--auth", "none", "--client-id", "x"], None).await;
    assert!(String::from_utf8_lossy(&output.stderr).contains("--client-id goes only with --auth mcp-oauth"));
    assert!(front.state.core.store.gateway_servers().list().await.unwrap().is_empty(), "nothing written");
    open.stop().await;
    front.stop().await;
}

/// A client ID metadata document (MCP 2025-11-25 basic/authorization §Client ID Metadata
/// Documents) end to end: the front broker's `client_id` is the URL of the document it serves,
/// and the authorization server — which has never registered it — fetches that document to know
/// it. The broker chooses a document by itself only on an https public URL, which a test cannot
/// serve; so the operator names the document's URL as `--client-id`, and the authorization
/// server allows plain http on the front broker's loopback port (its test allowance).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_authorization_server_knows_the_broker_by_its_metadata_document_is_connected_and_called() {
    // Arrange
    let authorization = spawn_app(Backend::Sqlite).await.unwrap();
    let front = spawn_app(Backend::Sqlite).await.unwrap();
    let port = url::Url::parse(&front.address).unwrap().port().unwrap();
    oauth_broker::authorization_server::client_metadata_document::testing::allow_plain_http_on_loopback_port(port);
    let upstream = Upstream::start(&["--require-oauth", &authorization.address], None).await;
    let options = ServiceOptions { resource: Some(&upstream.mcp_url), ..Default::default() };
    register_service(&authorization, "docs", &["demo"], options).await;
    let document = front.url("/oauth/client-metadata/mcp-docs");
    let added = servers_ok(
        &front,
        &["add", "docs", "--url", &upstream.mcp_url, "--auth", "mcp-oauth", "--client-id", &document, "--json"],
    )
    .await;
    let added: Value = serde_json::from_str(&added).unwrap();
    assert_eq!(
        (added["client_id"].as_str(), added["registration"].as_str()),
        (Some(document.as_str()), Some("operator"))
    );
    eventually("the broker serves the new server", Duration::from_secs(10), || async { served(&front, "docs_").await })
        .await;

    // Assert: the front broker serves its document at that URL, naming itself and its callback.
    let served_document: Value = reqwest::get(&document).await.unwrap().json().await.unwrap();
    assert_eq!(served_document["client_id"], document.as_str());
    assert_eq!(served_document["redirect_uris"], json!([front.url("/oauth/callback/mcp-docs")]));
    assert_eq!(served_document["token_endpoint_auth_method"], "none", "{served_document}");

    // Act: alice connects through both brokers and calls the server.
    let client = front.mcp_client(ALICE, ClientKind::Url).await;
    let (_, url) = url_elicitation_required(client.call("docs_connect", json!({})).await);
    connect_in_browser(&front, &authorization, &url, &upstream.mcp_url).await;
    let connected = client.call("docs_connect", json!({})).await.unwrap();
    assert_ne!(connected.is_error, Some(true), "{connected:?}");
    let (account, _) = whoami(&client.call("docs_whoami", json!({})).await.unwrap());

    // Assert: the authorization server issued alice's token to the document's URL as client,
    // without any registration of it.
    assert_eq!(account, authorization.user_id(ALICE).await);
    let grant = front.state.core.store.grants().for_user(&front.user_id(ALICE).await).await.unwrap().remove(0);
    assert_eq!(grant.provider, "mcp-docs");
    let registered = authorization.state.core.store.oauth_clients().by_id(&document).await.unwrap();
    assert!(registered.is_none(), "the authorization server holds no registration of it");

    client.close().await;
    upstream.stop().await;
    front.stop().await;
    authorization.stop().await;
}

/// `admin servers rediscover`: a server that moves to another authorization server (here a third
/// broker) is found there again; the broker registers at the new one, deletes the users' tokens
/// from the old one, and each user connects again through the new one on their next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_moves_to_another_authorization_server_is_found_again_and_its_users_connect_again() {
    // Arrange: the server behind its first authorization server; alice connected through it.
    let first = spawn_app(Backend::Sqlite).await.unwrap();
    let second = spawn_app(Backend::Sqlite).await.unwrap();
    let front = spawn_app(Backend::Sqlite).await.unwrap();
    let upstream = protected_server(&front, &first, "moving").await;
    let client = front.mcp_client(ALICE, ClientKind::Url).await;
    let (_, url) = url_elicitation_required(client.call("moving_connect", json!({})).await);
    connect_in_browser(&front, &first, &url, &upstream.mcp_url).await;
    assert_ne!(client.call("moving_connect", json!({})).await.unwrap().is_error, Some(true));
    let (at_first, _) = whoami(&client.call("moving_whoami", json!({})).await.unwrap());
    assert_eq!(at_first, first.user_id(ALICE).await);

    // Act + Assert: nothing moved yet; nothing is written.
    let unchanged = servers_ok(&front, &["rediscover", "moving"]).await;
    assert!(unchanged.contains("has not changed"), "{unchanged}");
    let not_there = servers_cli(&front, &["rediscover", "nobody"], None).await;
    assert!(String::from_utf8_lossy(&not_there.stderr).contains("no server named nobody"));

    // Act: the server, at the same address, now trusts the second authorization server.
    let address = upstream.mcp_url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    upstream.stop().await;
    let options = ServiceOptions { resource: Some(&format!("http://{address}/mcp")), ..Default::default() };
    register_service(&second, "moving", &["demo"], options).await;
    let moved = Upstream::start(&["--listen", &address, "--require-oauth", &second.address], None).await;
    let said = servers_ok(&front, &["rediscover", "moving"]).await;

    // Assert: the operator is told where it moved and what that costs the users.
    assert!(said.contains(&format!("moved from {}", first.address)), "{said}");
    assert!(said.contains(&second.address) && said.contains("1 user connection(s)"), "{said}");
    let alice = front.user_id(ALICE).await;
    assert!(front.state.core.store.grants().for_user(&alice).await.unwrap().is_empty(), "the old tokens are gone");
    eventually("the front broker uses the new authorization server", Duration::from_secs(10), || async {
        front
            .state
            .core
            .providers
            .find("mcp-moving")
            .is_some_and(|p| p.authorization_url.as_str().starts_with(&second.address))
    })
    .await;

    // Act: alice's next call; she connects through the second authorization server.
    let (_, url) = url_elicitation_required(client.call("moving_whoami", json!({})).await);
    connect_in_browser(&front, &second, &url, &moved.mcp_url).await;
    let (at_second, _) = whoami(&client.call("moving_whoami", json!({})).await.unwrap());

    // Assert: the server now knows alice as the second authorization server does.
    assert_eq!(at_second, second.user_id(ALICE).await);
    assert_ne!(at_second, at_first);
    front.state.core.store.audit_queue().flush().await;
    let audit = front.state.core.store.audit().entries(None, 200).await.unwrap();
    let entry = audit.iter().find(|e| e.action == "gateway_server.rediscovered").expect("audited");
    let detail = entry.detail.clone().unwrap();
    assert!(detail.contains("connections_deleted=1") && detail.contains("registration=dynamic"), "{detail}");

    client.close().await;
    moved.stop().await;
    front.stop().await;
    second.stop().await;
    first.stop().await;
}
