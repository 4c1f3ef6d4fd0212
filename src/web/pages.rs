//! One askama struct per page of the web's own (templates in `templates/`, all extending
//! `base.html`), sent with [`crate::html::render`]. Values are HTML-escaped by askama; never
//! pass a secret to a page.

use askama::Template;

use crate::display::ClientName;
use crate::html::SignedIn;

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
    /// The organization the connection is made in, and whose app it uses.
    pub organization: OrgLine,
    pub nav: SignedIn,
}

/// The organization a consent page acts in, by name, and whether the connection goes through
/// the organization's own app at the provider or the operator's.
#[derive(Debug, Clone)]
pub struct OrgLine {
    pub name: String,
    /// The client id the provider will see: the organization's own app's, else `None`.
    pub own_app_client_id: Option<String>,
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
