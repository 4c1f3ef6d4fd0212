//! The authorization server's consent page (`templates/authorize_consent.html`): which client
//! (name and `client_id`, and for a metadata-document client the host that vouches for it),
//! where approval sends the browser, which scopes, for which resource, as which user, and the
//! connections approving hands over at once (MCP security best practices §Confused deputy).

use askama::Template;
use axum::http::StatusCode;
use axum::response::Response;
use url::Url;

use super::authorize_request::AuthorizeRequest;
use super::client::ClientSource;
use super::redirect_uri;
use crate::broker::consent::registered_client_name;
use crate::display::{ClientName, safe_text};
use crate::html;
use crate::identity::browser::BrowserSession;
use crate::state::AppState;

#[derive(Debug)]
struct HiddenField {
    name: &'static str,
    value: String,
}

/// The consent page (`templates/authorize_consent.html`). Values are escaped by askama.
#[derive(Template)]
#[template(path = "authorize_consent.html")]
struct ConsentPage {
    action: String,
    client: ClientName,
    client_id: String,
    /// For metadata-document clients: the host that vouches for the name.
    document_host: Option<String>,
    redirect_uri: String,
    redirect_host: String,
    scopes: Vec<String>,
    resource: String,
    /// What the token will open: the broker's MCP server, or a named tool server.
    resource_name: String,
    username: String,
    csrf_token: String,
    hidden: Vec<HiddenField>,
    /// Connections this client id may already use: approving hands them over at once.
    already_allowed: Vec<String>,
}

/// The user's connections the token would open at once, so the page says what approving hands
/// over: for our MCP endpoint, what this client id may already use (anyone who can start a flow
/// under it inherits that); for a tool server's resource, what that tool server may already use
/// (the consents are its own, so every client holding a token for it inherits them).
pub(super) async fn connections_allowed(
    state: &AppState,
    request: &AuthorizeRequest,
    session: &BrowserSession,
) -> Result<Vec<String>, crate::store::StoreError> {
    let key = if request.resource == state.core.config.mcp_url().as_str() {
        crate::identity::ClientIdentity::OAuthClient(request.client.client_id.clone()).key()
    } else {
        match state.core.store.services().by_resource(&request.resource).await? {
            Some(service) => service.client().key(),
            None => return Ok(Vec::new()),
        }
    };
    let consents = state.core.store.consents().for_user(&session.user.id).await?;
    let grants = state.core.store.grants().for_user(&session.user.id).await?;
    Ok(consents
        .iter()
        .filter(|c| c.client_key == key)
        .filter_map(|c| grants.iter().find(|g| g.id == c.grant_id))
        .map(|g| {
            let provider =
                state.core.providers.find(&g.provider).map_or(g.provider.clone(), |p| p.display_name.clone());
            match &g.account_label {
                Some(account) => format!("{provider} ({})", safe_text(account)),
                None => provider,
            }
        })
        .collect())
}

/// How the consent page names the resource a token is for.
async fn resource_name(state: &AppState, resource: &str) -> String {
    if resource == state.core.config.mcp_url().as_str() {
        return "this broker's MCP server".into();
    }
    match state.core.store.services().by_resource(resource).await {
        Ok(Some(service)) => service.client().name().to_string(),
        _ => "a tool server".into(),
    }
}

pub(super) async fn consent_page(
    state: &AppState,
    request: &AuthorizeRequest,
    session: &BrowserSession,
    already_allowed: Vec<String>,
) -> Response {
    let client = &request.client;
    let page = ConsentPage {
        action: state.core.config.url("/authorize").path().to_owned(),
        client: registered_client_name(client.client_name.as_deref(), &client.client_id),
        client_id: client.client_id.clone(),
        document_host: (client.source == ClientSource::MetadataDocument)
            .then(|| redirect_uri::host_of(&client.client_id)),
        redirect_uri: request.redirect_uri.clone(),
        redirect_host: redirect_uri::host_of(&request.redirect_uri),
        scopes: request.scope.iter().cloned().collect(),
        resource: request.resource.clone(),
        resource_name: resource_name(state, &request.resource).await,
        username: safe_text(session.display_name()),
        csrf_token: session.csrf_token.clone(),
        hidden: request.fields().into_iter().map(|(name, value)| HiddenField { name, value }).collect(),
        already_allowed,
    };
    let mut response = html::render(StatusCode::OK, &page);
    // Approving or denying answers the POST with a redirect to the client (`crate::html::security_headers`).
    if let Ok(redirect) = Url::parse(&request.redirect_uri) {
        crate::html::security_headers::allow_form_redirects_to(&mut response, [&redirect]);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_consent_page_escapes_the_client_name_and_carries_the_form() {
        let page = ConsentPage {
            action: "/authorize".into(),
            client: registered_client_name(Some("<script>x</script>"), "abc"),
            client_id: "abc".into(),
            document_host: None,
            redirect_uri: "http://127.0.0.1:5/cb".into(),
            redirect_host: "127.0.0.1:5".into(),
            scopes: vec!["mcp".into()],
            resource: "http://127.0.0.1:8080/mcp".into(),
            resource_name: "this broker's MCP server".into(),
            username: "alice".into(),
            csrf_token: "tok".into(),
            hidden: vec![HiddenField { name: "state", value: "\"><b>".into() }],
            already_allowed: vec!["Demo <i>(x)</i>".into()],
        };
        let html = page.render().unwrap();
        assert!(!html.contains("<script>x"));
        assert!(!html.contains("\"><b>"));
        assert!(!html.contains("<i>(x)") && html.contains("Connections it may use at once"));
        assert!(html.contains("name=\"action\" value=\"approve\""));
        assert!(html.contains("name=\"csrf_token\" value=\"tok\""));
        assert!(html.contains("127.0.0.1:5"));
    }
}
