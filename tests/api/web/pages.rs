//! The pages a person sees (issue 13): the callback leaves no code in the address bar and its
//! outcome is shown to the owner only; every error page says what happened, what to do, and
//! links home; clients are named one way with scope descriptions; names others chose cannot
//! reorder or hide text. (How the pages fit a phone is checked in a real browser: `browser`.)

use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, ClientConfig, ElicitationCapability, Implementation, UrlElicitationCapability};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::helpers::{ALICE, BOB, ClientKind, TestApp, hidden_field, hidden_fields, location};
use crate::on_both_backends;

const ME: &str = r#"{"provider": "demo", "method": "GET", "path": "/me"}"#;

/// The connect link (and its id) a `-32042` answer to `provider_request` carries, with its message.
async fn connect_link(client: &crate::helpers::McpClient) -> (String, String, String) {
    let error = match client.call("provider_request", serde_json::from_str(ME).unwrap()).await {
        Err(rmcp::ServiceError::McpError(e)) => e,
        other => panic!("expected -32042, got {other:?}"),
    };
    assert_eq!(error.code.0, -32042);
    let elicitation = &error.data.unwrap()["elicitations"][0];
    let text = |key: &str| elicitation[key].as_str().unwrap().to_owned();
    (text("url"), text("elicitationId"), text("message"))
}

/// Signs `name` in if needed, approves the consent page, and returns the provider's authorize
/// URL (the consent page's HTML too).
async fn approve_consent(app: &TestApp, browser: &reqwest::Client, url: &str, name: &str) -> (String, String) {
    let path = url.strip_prefix(&app.address).unwrap();
    if browser.get(url).send().await.unwrap().status() == 303 {
        assert_eq!(app.sign_in(browser, name, path).await.status(), 303);
    }
    let html = browser.get(url).send().await.unwrap().text().await.unwrap();
    let csrf = hidden_field(&html, "csrf_token").unwrap();
    let approved =
        browser.post(url).form(&[("csrf_token", csrf.as_str()), ("action", "approve")]).send().await.unwrap();
    assert_eq!(approved.status(), 303);
    (location(&approved), html)
}

fn assert_error_page(html: &str, what: &str) {
    assert!(html.contains("What to do now:"), "{what} says what to do: {html}");
    assert!(html.contains("href=\"/\""), "{what} links home: {html}");
}

async fn the_callback_leaves_a_clean_address_and_only_the_owner_sees_the_outcome(app: &TestApp) {
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let alice = app.browser();

    // Declined at the provider: the error outcome is shown at the clean address too.
    let (declined_url, declined_id, _) = connect_link(&client).await;
    let (authorize, consent) = approve_consent(app, &alice, &declined_url, ALICE).await;
    for description in ["See your account name", "Read your notes"] {
        assert!(consent.contains(description), "the consent page describes each scope: {consent}");
    }
    let callback = app.demo_provider_redirect(&alice, &authorize, "demo-user", "deny").await;
    assert!(callback.contains("error=access_denied"));
    let declined = app.land(&alice, &callback).await;
    assert_eq!(declined.url().path(), format!("/connect/{declined_id}/result"));
    assert_eq!(declined.status(), 400);
    let html = declined.text().await.unwrap();
    assert!(html.contains("access_denied") && html.contains("Nothing was connected"), "{html}");
    assert_error_page(&html, "the declined result");

    // Connected: the same clean address shows the success, and the code is nowhere on it.
    let (url, id, _) = connect_link(&client).await;
    assert_ne!(id, declined_id, "a failed link is not reused");
    let (authorize, _) = approve_consent(app, &alice, &url, ALICE).await;
    let callback = app.demo_provider_redirect(&alice, &authorize, "demo-user", "approve").await;
    let code = url::Url::parse(&callback).unwrap().query_pairs().find(|(k, _)| k == "code").unwrap().1.into_owned();
    let done = app.land(&alice, &callback).await;
    let result_url = done.url().clone();
    assert_eq!(result_url.path(), format!("/connect/{id}/result"));
    assert_eq!(done.status(), 200);
    let html = done.text().await.unwrap();
    assert!(html.contains("Connected to Demo Provider") && html.contains("Return to your MCP client"), "{html}");
    assert!(html.contains(">Sign out</button>") && html.contains("href=\"/connections\""), "{html}");
    assert!(!html.contains(&code));
    // Reloading the result page is harmless: same page, nothing re-sent to the provider.
    assert_eq!(alice.get(result_url.as_str()).send().await.unwrap().status(), 200);

    // Another account learns nothing: the same answer as for a link that never existed.
    let bob = app.browser();
    app.sign_in(&bob, BOB, "/").await;
    for target in [result_url.to_string(), app.url(&format!("/connect/{declined_id}/result"))] {
        let page = bob.get(&target).send().await.unwrap();
        assert_eq!(page.status(), 404);
        let html = page.text().await.unwrap();
        assert!(html.contains("Link not valid") && !html.contains("Demo Provider"), "{html}");
    }
    let never = bob.get(app.url("/connect/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/result")).send().await.unwrap();
    assert_eq!(never.status(), 404);
    // A signed-out browser is sent to sign in, whatever the id.
    for target in [result_url.to_string(), app.url("/connect/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/result")] {
        let page = app.browser().get(&target).send().await.unwrap();
        assert_eq!(page.status(), 303);
        assert!(location(&page).starts_with("/login?next=/connect/"), "{}", location(&page));
    }
    client.close().await;
}
on_both_backends!(clean_callback, the_callback_leaves_a_clean_address_and_only_the_owner_sees_the_outcome);

async fn error_pages_say_what_happened_what_to_do_and_link_home(app: &TestApp) {
    let alice = app.browser();
    app.sign_in(&alice, ALICE, "/").await;

    // A callback nobody started: 303 to a fixed problem page, not a page at the callback URL.
    let forged = alice.get(app.url("/oauth/callback?code=stolen-code&state=made-up")).send().await.unwrap();
    assert_eq!(forged.status(), 303);
    assert_eq!(location(&forged), "/oauth/callback/problem/not-valid");
    let landed = app.land(&alice, &app.url("/oauth/callback?code=stolen-code&state=made-up")).await;
    assert_eq!(landed.status(), 400);
    let html = landed.text().await.unwrap();
    assert!(html.contains("Response not valid") && !html.contains("stolen-code"), "{html}");
    assert_error_page(&html, "an unknown callback");

    let csrf =
        hidden_field(&alice.get(app.url("/connections")).send().await.unwrap().text().await.unwrap(), "csrf_token")
            .unwrap();
    let cases = [
        ("a malformed link", alice.get(app.url("/connect/not-an-id")).send().await.unwrap(), 404),
        (
            "an unknown link",
            alice.get(app.url("/connect/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")).send().await.unwrap(),
            404,
        ),
        ("an unknown problem", alice.get(app.url("/oauth/callback/problem/nonsense")).send().await.unwrap(), 404),
        (
            "a stale form",
            alice
                .post(app.url("/connections/revoke"))
                .form(&[("csrf_token", "stale"), ("grant_id", "g")])
                .send()
                .await
                .unwrap(),
            403,
        ),
        (
            "a connection that is gone",
            alice
                .post(app.url("/connections/revoke"))
                .form(&[("csrf_token", csrf.as_str()), ("grant_id", "gone")])
                .send()
                .await
                .unwrap(),
            404,
        ),
    ];
    for (what, response, status) in cases {
        assert_eq!(response.status(), status, "{what}");
        let html = response.text().await.unwrap();
        assert_error_page(&html, what);
    }
}
on_both_backends!(error_pages, error_pages_say_what_happened_what_to_do_and_link_home);

/// An MCP client that calls itself `name` in `initialize`, with URL-mode elicitation.
async fn client_calling_itself(
    app: &TestApp,
    name: &str,
) -> rmcp::service::RunningService<rmcp::RoleClient, ClientConfig> {
    let mut capabilities = ClientCapabilities::default();
    capabilities.elicitation = Some(ElicitationCapability::new().with_url(UrlElicitationCapability::default()));
    let info = ClientConfig::new(capabilities, Implementation::new(name, "1.0.0"));
    let token = app.token_for(ALICE).await;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(app.mcp_url()).auth_header(token),
    );
    info.serve(transport).await.unwrap()
}

async fn names_others_chose_cannot_reorder_or_hide_text(app: &TestApp) {
    // Registration refuses C0 controls, but bidi overrides and isolates pass (right-to-left
    // scripts have uses for them); an MCP client's own name is not checked at all.
    const SPOOF: &str = "Notes\u{202E}exe.txt\u{2066}";
    const SHOWN: &str = "Notes[U+202E]exe.txt[U+2066]";
    let alice = app.browser();

    // A client registers itself with the broker's authorization server under such a name.
    let registered = app
        .http()
        .post(app.url("/register"))
        .json(&json!({"client_name": SPOOF, "redirect_uris": ["http://127.0.0.1:33418/callback"],
                      "token_endpoint_auth_method": "none", "grant_types": ["authorization_code"],
                      "response_types": ["code"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), 201);
    let client_id = registered.json::<Value>().await.unwrap()["client_id"].as_str().unwrap().to_owned();
    let query: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("response_type", "code"),
            ("client_id", client_id.as_str()),
            ("redirect_uri", "http://127.0.0.1:33418/callback"),
            ("code_challenge", &oauth_broker::pkce::s256("a-verifier-long-enough-for-rfc-7636-section-4-1-xx")),
            ("code_challenge_method", "S256"),
            ("state", "s"),
            ("resource", &app.mcp_url()),
        ])
        .finish();
    let authorize = app.url(&format!("/authorize?{query}"));
    let next = authorize.strip_prefix(&app.address).unwrap();
    assert_eq!(app.sign_in(&alice, ALICE, next).await.status(), 303);
    let page = alice.get(&authorize).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains(SHOWN), "the registered name is shown with its controls visible: {html}");
    assert!(!html.contains('\u{202E}') && !html.contains('\u{2066}') && !html.contains('\u{7}'), "{html}");
    assert!(hidden_fields(&html).iter().any(|(k, _)| k == "client_id"), "still the real consent form");

    // An MCP client calls itself that in `initialize`: the connect page shows it the same way.
    let client = client_calling_itself(app, &format!("{SPOOF}\u{7}")).await;
    let error = match client.peer().call_tool(call_me()).await {
        Err(rmcp::ServiceError::McpError(e)) => e,
        other => panic!("expected -32042, got {other:?}"),
    };
    let url = error.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned();
    let html = alice.get(&url).send().await.unwrap().text().await.unwrap();
    assert!(html.contains(&format!("It calls itself “{SHOWN}[U+0007]”")), "{html}");
    assert!(!html.contains('\u{202E}') && !html.contains('\u{2066}') && !html.contains('\u{7}'), "{html}");
    let _ = client.cancel().await;
}
on_both_backends!(spoofed_names, names_others_chose_cannot_reorder_or_hide_text);

fn call_me() -> rmcp::model::CallToolRequestParams {
    let mut params = rmcp::model::CallToolRequestParams::new("provider_request");
    params.arguments = serde_json::from_str::<Value>(ME).unwrap().as_object().cloned();
    params
}

async fn a_client_missing_only_its_own_approval_is_asked_to_approve_it(app: &TestApp) {
    // First connection: the account itself is not connected.
    let first = app.mcp_client(ALICE, ClientKind::Url).await;
    let (url, _, message) = connect_link(&first).await;
    assert!(message.starts_with("Connect your Demo Provider account"), "{message}");
    assert_eq!(app.approve_in_browser(&app.browser(), &url, ALICE).await.status(), 200);

    // A second client finds the account connected: only this client's approval is missing,
    // and that is what the message (which the demo client prints) says.
    let token = app.token_for_client(ALICE, "second-tool").await;
    let second = app.mcp_client_with_token(&token, ClientKind::Url).await.unwrap();
    let (_, _, message) = connect_link(&second).await;
    assert!(message.starts_with("Allow this client to use your existing Demo Provider connection"), "{message}");
    assert!(!message.contains("not connected") && !message.starts_with("Connect"), "{message}");
    first.close().await;
    second.close().await;
}
on_both_backends!(approve_this_client, a_client_missing_only_its_own_approval_is_asked_to_approve_it);

/// Every unknown path (`/admin/` with its slash too) gets the rendered 404 page, with the top
/// bar when signed in; error pages keep the bar; the token API's unknown paths get a problem.
async fn unknown_paths_and_error_pages_are_rendered_with_the_top_bar(app: &TestApp) {
    let anonymous = app.browser();
    for path in ["/no-such-page", "/admin/", "/connections/", "/demo-provider/nothing"] {
        let response = anonymous.get(app.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 404, "{path}");
        assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/html"), "{path}");
        let html = response.text().await.unwrap();
        assert!(html.contains("Page not found"), "{path}: {html}");
        assert_error_page(&html, path);
        assert!(!html.contains("Sign out"), "{path}: no top bar for a signed-out browser");
    }

    let alice = app.browser();
    app.sign_in(&alice, ALICE, "/").await;
    for (path, status) in [("/no-such-page", 404), ("/admin/", 404), ("/connect/not-an-id", 404)] {
        let response = alice.get(app.url(path)).send().await.unwrap();
        assert_eq!(response.status(), status, "{path}");
        let html = response.text().await.unwrap();
        assert_error_page(&html, path);
        assert!(html.contains("My connections") && html.contains("Sign out"), "{path} keeps the top bar: {html}");
    }
    let forged = app.land(&alice, &app.url("/oauth/callback?code=c&state=made-up")).await;
    assert_eq!(forged.status(), 400);
    assert!(forged.text().await.unwrap().contains("Sign out"), "a refused callback's page keeps the top bar");

    let api = reqwest::Client::new().post(app.url("/v1/no-such-endpoint")).send().await.unwrap();
    assert_eq!(api.status(), 404);
    assert_eq!(api.headers()["content-type"], "application/problem+json");
    assert_eq!(api.json::<Value>().await.unwrap()["code"], "not_found");
}
on_both_backends!(unknown_paths, unknown_paths_and_error_pages_are_rendered_with_the_top_bar);
