//! MCP 2026-07-28 over plain HTTP, the way a stateless client sends it: a `tools/call` with its
//! `_meta`, the JSON-RPC answer in the response, the link and `requestState` of an
//! `InputRequiredResult`, and the browser's leg up to the provider's redirect back.

use serde_json::{Value, json};

use super::{ALICE, TestApp, hidden_field, location};

/// The browser leg up to the provider's redirect back to the broker: sign in, approve at the
/// broker, approve at the demo provider. Returns the callback URL, not yet opened.
pub(crate) async fn browser_until_callback(app: &TestApp, browser: &reqwest::Client, connect_url: &str) -> String {
    let path = connect_url.strip_prefix(&app.address).unwrap();
    if browser.get(connect_url).send().await.unwrap().status() == 303 {
        assert_eq!(app.sign_in(browser, ALICE, path).await.status(), 303);
    }
    let html = browser.get(connect_url).send().await.unwrap().text().await.unwrap();
    let csrf = hidden_field(&html, "csrf_token").expect("the consent page");
    let approved =
        browser.post(connect_url).form(&[("csrf_token", csrf.as_str()), ("action", "approve")]).send().await.unwrap();
    assert_eq!(approved.status(), 303, "to the provider");
    app.demo_provider_redirect(browser, &location(&approved), "demo-user", "approve").await
}

pub(crate) const ME: fn() -> Value = || json!({"provider": "demo", "method": "GET", "path": "/me"});
pub(crate) const URL_AND_FORMS: fn() -> Value = || json!({"elicitation": {"url": {}, "form": {}}});

pub(crate) fn request_2026(
    app: &TestApp,
    token: &str,
    tool: &str,
    arguments: Value,
    capabilities: Value,
    retry: Option<(Value, &str)>,
    progress_token: Option<&str>,
) -> reqwest::RequestBuilder {
    let mut params = json!({
        "name": tool,
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "round-trip-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        },
    });
    if let Some((responses, state)) = retry {
        params["inputResponses"] = responses;
        params["requestState"] = json!(state);
    }
    if let Some(token) = progress_token {
        params["_meta"]["progressToken"] = json!(token);
    }
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
    reqwest::Client::new()
        .post(app.mcp_url())
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&body)
}

/// The JSON-RPC answer in a response body: JSON, or SSE whose data lines hold it.
pub(crate) fn answer_in(text: &str) -> Option<Value> {
    std::iter::once(text)
        .chain(text.lines().filter_map(|line| line.strip_prefix("data:")))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|message| message.get("id").is_some())
}

/// The connect link of a first answer that must be an `InputRequiredResult` with one url-mode
/// request, and its state. Checks nothing of 2025-11-25 leaks in.
pub(crate) fn link_and_state(answer: &Value) -> (String, String) {
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    let text = answer.to_string();
    assert!(!text.contains("-32042"), "no 2025-11-25 error in this revision: {text}");
    let request = &result["inputRequests"]["authorize"];
    assert_eq!(request["method"], "elicitation/create", "{answer}");
    assert_eq!(request["params"]["mode"], "url", "{answer}");
    assert!(
        request["params"].get("elicitationId").is_none_or(|id| id == ""),
        "no elicitation id in this revision: {answer}"
    );
    let url = request["params"]["url"].as_str().unwrap().to_owned();
    let state = result["requestState"].as_str().unwrap().to_owned();
    (url, state)
}
