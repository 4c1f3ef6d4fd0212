//! The browser's leg of the connect flow, one helper per step: sign in, the broker's consent
//! page, the demo provider's approve page, and the landing after the callback.

use super::{ClientKind, McpClient, PASSWORD, TestApp, hidden_field, hidden_fields, location, urlencode};

impl TestApp {
    /// Approves a consent-only link ("let this client use your connection") as `name`:
    /// signs in if needed, checks the page asks nothing of the provider, and allows.
    #[allow(dead_code, reason = "used by the consent tests")]
    pub async fn allow_in_browser(&self, browser: &reqwest::Client, connect_url: &str, name: &str) -> String {
        let path = connect_url.strip_prefix(&self.address).expect("connect URL is ours");
        if browser.get(connect_url).send().await.unwrap().status() == 303 {
            assert_eq!(self.sign_in(browser, name, path).await.status(), 303, "sign-in redirects back");
        }
        let page = browser.get(connect_url).send().await.unwrap();
        assert_eq!(page.status(), 200, "consent page");
        let html = page.text().await.unwrap();
        assert!(html.contains("Allow this client"), "a consent-only page: {html}");
        let csrf = hidden_field(&html, "csrf_token").expect("consent form has a CSRF token");
        let allowed = browser
            .post(connect_url)
            .form(&[("csrf_token", csrf.as_str()), ("action", "approve")])
            .send()
            .await
            .unwrap();
        assert_eq!(allowed.status(), 200, "allowing ends here: no trip to the provider");
        html
    }

    /// Signs `name` in on this browser (following the login form).
    pub async fn sign_in(&self, browser: &reqwest::Client, name: &str, next: &str) -> reqwest::Response {
        let page = browser.get(self.url(&format!("/login?next={}", urlencode(next)))).send().await.unwrap();
        assert_eq!(page.status(), 200, "login page");
        let html = page.text().await.unwrap();
        let csrf = hidden_field(&html, "csrf_token").expect("login form has a CSRF field");
        browser
            .post(self.url("/login"))
            .form(&[("username", name), ("password", PASSWORD), ("next", next), ("csrf_token", &csrf)])
            .send()
            .await
            .unwrap()
    }

    /// The whole browser leg for a connect URL, as `name`, approving at the broker and at the
    /// demo provider. Returns the final callback response.
    pub async fn approve_in_browser(
        &self,
        browser: &reqwest::Client,
        connect_url: &str,
        name: &str,
    ) -> reqwest::Response {
        self.approve_in_browser_as(browser, connect_url, name, "demo-user").await
    }

    /// [`Self::approve_in_browser`], choosing `account` at the demo provider.
    pub async fn approve_in_browser_as(
        &self,
        browser: &reqwest::Client,
        connect_url: &str,
        name: &str,
        account: &str,
    ) -> reqwest::Response {
        let path = connect_url.strip_prefix(&self.address).expect("connect URL is ours");
        let first = browser.get(connect_url).send().await.unwrap();
        if first.status() == 303 {
            let signed_in = self.sign_in(browser, name, path).await;
            assert_eq!(signed_in.status(), 303, "sign-in redirects back");
        }
        let consent = browser.get(connect_url).send().await.unwrap();
        assert_eq!(consent.status(), 200, "consent page");
        let html = consent.text().await.unwrap();
        let csrf = hidden_field(&html, "csrf_token").expect("consent form has a CSRF token");
        let approved = browser
            .post(connect_url)
            .form(&[("csrf_token", csrf.as_str()), ("action", "approve")])
            .send()
            .await
            .unwrap();
        assert_eq!(approved.status(), 303, "approve redirects to the provider");
        let provider_url = location(&approved);
        self.approve_at_demo_provider(browser, &provider_url, account).await
    }

    /// At the demo provider's authorize page: approve as `account`, then follow the redirect
    /// back to our callback.
    pub async fn approve_at_demo_provider(
        &self,
        browser: &reqwest::Client,
        authorize_url: &str,
        account: &str,
    ) -> reqwest::Response {
        let callback_url = self.demo_provider_redirect(browser, authorize_url, account, "approve").await;
        self.land(browser, &callback_url).await
    }

    /// Opens the provider's redirect to our callback in `browser`. The callback never shows a
    /// page itself (its URL holds the code and state): it must answer 303 to one of our own
    /// clean addresses, which this opens and returns.
    pub async fn land(&self, browser: &reqwest::Client, callback_url: &str) -> reqwest::Response {
        let response = browser.get(callback_url).send().await.unwrap();
        assert_eq!(response.status(), 303, "the callback redirects to a clean page");
        let target = location(&response);
        assert!(target.starts_with('/') && !target.starts_with("//"), "a page of ours: {target}");
        assert!(!target.contains('?'), "the clean page's address has no query: {target}");
        let sent = url::Url::parse(callback_url).unwrap();
        for (name, value) in sent.query_pairs().filter(|(k, v)| ["code", "state"].contains(&k.as_ref()) && v.len() > 4)
        {
            assert!(!target.contains(value.as_ref()), "the clean page's address holds no {name}: {target}");
        }
        browser.get(self.url(&target)).send().await.unwrap()
    }

    /// Submits the demo provider's approve page and returns where it redirects (our callback).
    pub async fn demo_provider_redirect(
        &self,
        browser: &reqwest::Client,
        authorize_url: &str,
        account: &str,
        decision: &str,
    ) -> String {
        let page = browser.get(authorize_url).send().await.unwrap();
        assert_eq!(page.status(), 200, "demo provider approve page");
        let html = page.text().await.unwrap();
        let mut form: Vec<(String, String)> = hidden_fields(&html);
        form.retain(|(k, _)| k != "account" && k != "decision");
        form.push(("account".into(), account.into()));
        form.push(("decision".into(), decision.into()));
        let answer = browser.post(self.url("/demo-provider/authorize")).form(&form).send().await.unwrap();
        assert_eq!(answer.status(), 302, "demo provider redirects back");
        location(&answer)
    }

    /// A URL-mode client for `name` whose demo account is connected (via -32042 and the
    /// browser flow).
    pub async fn connected_client(&self, name: &str) -> McpClient {
        let client = self.mcp_client(name, ClientKind::Url).await;
        let error = match client
            .call("provider_request", serde_json::json!({"provider": "demo", "method": "GET", "path": "/me"}))
            .await
        {
            Err(rmcp::ServiceError::McpError(e)) => e,
            other => panic!("expected -32042, got {other:?}"),
        };
        let url = error.data.unwrap()["elicitations"][0]["url"].as_str().unwrap().to_owned();
        let browser = self.browser();
        assert_eq!(self.approve_in_browser(&browser, &url, name).await.status(), 200);
        client
    }
}
