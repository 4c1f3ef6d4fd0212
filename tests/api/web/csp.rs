//! The Content-Security-Policy's `form-action` on every page: the broker's own origin, plus
//! only the redirect the page's form needs (the provider's authorization origin on the provider
//! consent page, the client's redirect origin on the authorization server's consent page).

use serde_json::{Value, json};

use crate::helpers::{ALICE, ClientKind, TestApp, location, refusal, urlencode};
use crate::on_both_backends;

/// The sources of the page's CSP `form-action`.
fn form_action(response: &reqwest::Response) -> Vec<String> {
    let csp = response.headers()["content-security-policy"].to_str().unwrap();
    let directive = csp.split(';').map(str::trim).find(|d| d.starts_with("form-action ")).expect("form-action");
    directive.split_whitespace().skip(1).map(str::to_owned).collect()
}

async fn forms_may_post_only_to_the_broker_and_the_redirect_their_page_needs(app: &TestApp) {
    let own = app.address.clone();
    // Ordinary pages: the broker only.
    let browser = app.browser();
    for path in ["/", "/login", "/connections", "/no-such-page"] {
        let response = browser.get(app.url(path)).send().await.unwrap();
        assert_eq!(form_action(&response), ["'self'"], "{path}");
    }

    // The provider consent page: plus the provider's authorization origin (the demo provider
    // lives at the broker's own origin).
    let client = app.mcp_client(ALICE, ClientKind::Url).await;
    let link = refusal(&client, "provider_request", json!({"provider": "demo", "method": "GET", "path": "/me"})).await;
    let url = link.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned();
    app.sign_in(&browser, ALICE, url.strip_prefix(&own).unwrap()).await;
    let consent = browser.get(&url).send().await.unwrap();
    assert_eq!(consent.status(), 200);
    assert_eq!(form_action(&consent), ["'self'", own.as_str()]);

    // The authorization server's consent page: plus that client's redirect origin, no other.
    let registered = app
        .http()
        .post(app.url("/register"))
        .json(&json!({"client_name": "CSP Tool", "redirect_uris": ["https://tool.example/oauth/cb"],
                      "token_endpoint_auth_method": "none"}))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), 201);
    let client_id = registered.json::<Value>().await.unwrap()["client_id"].as_str().unwrap().to_owned();
    let query = format!(
        "/authorize?response_type=code&client_id={}&redirect_uri={}&code_challenge={}&code_challenge_method=S256&resource={}",
        urlencode(&client_id),
        urlencode("https://tool.example/oauth/cb"),
        "a".repeat(43),
        urlencode(&app.mcp_url()),
    );
    let page = browser.get(app.url(&query)).send().await.unwrap();
    assert_eq!(page.status(), 200, "{}", location(&page));
    assert_eq!(form_action(&page), ["'self'", "https://tool.example"]);
    client.close().await;
}
on_both_backends!(csp_form_action, forms_may_post_only_to_the_broker_and_the_redirect_their_page_needs);
