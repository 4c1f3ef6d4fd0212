//! One askama struct per page (templates in `templates/`, all extending `base.html`), and the
//! one way pages are sent: HTML, `Cache-Control: no-store` (pages carry CSRF tokens and
//! per-user details). Values are HTML-escaped by askama; never pass a secret to a page.

use askama::Template;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::display::{ClientName, safe_text};
use crate::identity::browser::BrowserSession;

/// A sign-out button on a page (used where the fix is "sign in as someone else").
#[derive(Debug, Clone)]
pub struct SignOutForm {
    /// The browser session's CSRF token.
    pub csrf_token: String,
    /// Where to go after signing out (a local path; checked again on submit).
    pub next: String,
}

/// Results, refusals and errors: a title, what happened in plain words, what to do now, and a
/// link home.
#[derive(Template, Debug, Clone)]
#[template(path = "message.html")]
pub struct MessagePage {
    pub title: String,
    /// What happened.
    pub message: String,
    /// What to do now.
    pub next_step: String,
    pub sign_out: Option<SignOutForm>,
    /// Who is signed in, when the page is for them (the top bar then offers My connections and
    /// Sign out).
    pub signed_in: Option<SignedIn>,
}

/// The local sign-in form.
#[derive(Template)]
#[template(path = "login.html")]
pub struct LoginPage {
    /// Local path to continue to after signing in.
    pub next: String,
    /// The double-submit value, also in the login CSRF cookie.
    pub csrf_token: String,
    /// The username typed before, so a failed attempt does not wipe it.
    pub username: String,
    pub error: Option<String>,
}

/// The consent page: who asks, for which provider and scopes, and where Approve goes.
#[derive(Template)]
#[template(path = "consent.html")]
pub struct ConsentPage {
    /// The authorization id (elicitationId), for the form action.
    pub id: String,
    /// The self-reported `clientInfo` name, if the client gave one (display text).
    pub client_name: Option<String>,
    /// The client as its token identifies it ([`crate::broker::consent::client_name`]).
    pub client: ClientName,
    pub provider_name: String,
    pub provider_id: String,
    pub scopes: Vec<ScopeLine>,
    pub authorization_host: String,
    pub redirect_uri: String,
    /// A server behind the broker this client may call once approved too (its registered name).
    pub server: Option<String>,
    pub nav: SignedIn,
}

/// Who is signed in: the top bar of signed-in pages (`templates/nav_signed_in.html`: home, My
/// connections, Sign out) and the forms that need the session's CSRF token.
#[derive(Debug, Clone)]
pub struct SignedIn {
    /// Display text ([`crate::display::safe_text`]).
    pub username: String,
    pub csrf_token: String,
    /// The top bar then links to the admin pages.
    pub admin: bool,
}

impl SignedIn {
    pub fn of(session: &BrowserSession) -> Self {
        SignedIn {
            username: safe_text(session.display_name()),
            csrf_token: session.csrf_token.clone(),
            admin: session.user.is_admin(),
        }
    }
}

/// One permission on a consent page: the scope, and what it allows where the provider's
/// configuration says (`scope_descriptions`).
#[derive(Debug, Clone)]
pub struct ScopeLine {
    pub scope: String,
    pub description: Option<String>,
}

impl ScopeLine {
    pub fn list(provider: &crate::config::ProviderConfig, scopes: &crate::domain::Scopes) -> Vec<Self> {
        scopes
            .iter()
            .map(|scope| ScopeLine {
                scope: scope.to_owned(),
                description: provider.scope_description(scope).map(str::to_owned),
            })
            .collect()
    }
}

#[derive(Template)]
#[template(path = "home.html")]
pub struct HomePage {
    pub signed_in: Option<SignedIn>,
}

/// Renders `page` with `status`. A template that fails to render is a bug: logged, plain 500.
pub fn render<T: Template>(status: StatusCode, page: &T) -> Response {
    match page.render() {
        Ok(html) => {
            let mut response = (status, html).into_response();
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(error) => {
            tracing::error!(%error, "page template failed to render");
            let mut response = (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response();
            response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
    }
}

/// The message page a response carries, kept beside its rendered body so a later layer
/// ([`super::error::top_bar_on_error_pages`]) can render it again for a signed-in browser.
#[derive(Clone)]
pub struct ShownMessage(pub std::sync::Arc<MessagePage>);

/// [`render`] for a message page, which a signed-in browser then sees with its top bar.
pub fn render_message(status: StatusCode, page: MessagePage) -> Response {
    let mut response = render(status, &page);
    response.extensions_mut().insert(ShownMessage(std::sync::Arc::new(page)));
    response
}

/// A message page with `status`: what happened, and what to do now.
pub fn message(
    status: StatusCode,
    title: impl Into<String>,
    message: impl Into<String>,
    next_step: impl Into<String>,
) -> Response {
    let page = MessagePage {
        title: title.into(),
        message: message.into(),
        next_step: next_step.into(),
        sign_out: None,
        signed_in: None,
    };
    render_message(status, page)
}

/// A 303 See Other (after a POST the browser must GET the target): a local path we checked, or
/// the provider's authorization URL we built.
pub fn see_other(location: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    match HeaderValue::from_str(location) {
        Ok(value) => {
            response.headers_mut().insert(header::LOCATION, value);
        }
        Err(_) => {
            response.headers_mut().insert(header::LOCATION, HeaderValue::from_static("/"));
        }
    }
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_escape_what_they_show() {
        let html = MessagePage {
            title: "t".into(),
            message: "<script>x</script>".into(),
            next_step: "n".into(),
            sign_out: None,
            signed_in: None,
        }
        .render()
        .unwrap();
        assert!(!html.contains("<script>x"));
        assert!(html.contains("&#60;script&#62;") || html.contains("&lt;script&gt;"));
    }

    #[test]
    fn rendered_pages_are_not_cached() {
        let response = message(StatusCode::OK, "t", "m", "n");
        assert_eq!(response.headers()[header::CACHE_CONTROL], "no-store");
        assert!(response.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/html"));
    }
}

/// One connection on the "my connections" page (never a token).
pub struct ConnectionRow {
    pub grant_id: String,
    pub provider: String,
    /// Display text.
    pub account: String,
    pub scopes: String,
    /// The core's status, in words ([`crate::broker::connection_status::Status::describe`]).
    pub status: String,
    /// Its stable code (`ready`, `refresh_failing`, `revoked`, …), for the page's markup.
    pub status_code: &'static str,
    /// Offer a Reconnect button.
    pub reconnect: bool,
    /// The clients allowed to use this connection.
    pub clients: Vec<ClientConsentRow>,
    /// An API-key connection: the key's last characters (its Replace form is shown).
    pub key_hint: Option<String>,
}

/// One client's consent to use a connection, with its Revoke form's values.
#[derive(Debug, Clone)]
pub struct ClientConsentRow {
    pub client_key: String,
    pub client: ClientName,
    pub scopes: String,
    /// False when the connection has since gained scopes: the client will ask again.
    pub current: bool,
    /// `YYYY-MM-DD` (UTC) of the latest approval.
    pub since: String,
}

/// The consent page for a client that wants to use an existing connection (no provider trip).
#[derive(Template)]
#[template(path = "allow_client.html")]
pub struct AllowClientPage {
    pub id: String,
    pub client: ClientName,
    /// The self-reported `clientInfo` name, if any (display text).
    pub client_name: Option<String>,
    pub provider_name: String,
    pub provider_id: String,
    /// Display text.
    pub account: String,
    pub scopes: Vec<ScopeLine>,
    /// Scopes this client was allowed before (an older consent), so the page can say what is new.
    pub previously_allowed: Vec<String>,
    /// A server behind the broker this client may call once approved too (its registered name).
    pub server: Option<String>,
    pub nav: SignedIn,
}

/// The consent page for a client that wants to call a server behind the broker: the server by the name the operator registered, never by what it says about itself.
#[derive(Template)]
#[template(path = "allow_server.html")]
pub struct AllowServerPage {
    pub id: String,
    pub client: ClientName,
    /// The self-reported `clientInfo` name, if any (display text).
    pub client_name: Option<String>,
    /// The server's registered name.
    pub server: String,
    pub nav: SignedIn,
}

#[derive(Template)]
#[template(path = "connections.html")]
pub struct ConnectionsPage {
    pub nav: SignedIn,
    pub rows: Vec<ConnectionRow>,
    /// MCP clients signed in to the broker through its authorization server (local mode).
    pub apps: Vec<AppRow>,
    /// Which client may call which server behind the broker ([`super::server_approvals`]).
    pub servers: Vec<ServerApprovalRow>,
    /// After a revocation: what the provider was told (fixed text per outcome).
    pub notice: Option<String>,
}

/// A client the user approved for a server behind the broker, with its Withdraw form's values.
#[derive(Debug, Clone)]
pub struct ServerApprovalRow {
    pub server_id: String,
    /// The server's registered name (display text).
    pub server: String,
    pub client_key: String,
    pub client: ClientName,
    /// `YYYY-MM-DD` (UTC) of the approval.
    pub since: String,
}

/// An MCP client the user approved at the broker's `/authorize`, with its Sign-out form's value.
#[derive(Debug, Clone)]
pub struct AppRow {
    pub client_id: String,
    pub client: ClientName,
    pub scopes: String,
    /// `YYYY-MM-DD` (UTC) of the first live approval.
    pub since: String,
}
