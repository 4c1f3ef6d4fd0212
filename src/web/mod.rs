//! Hosted pages (askama templates in `templates/`): sign-in, connect/consent, OAuth callback.
//!
//! | route                  | file          | what                                              |
//! |------------------------|---------------|---------------------------------------------------|
//! | `GET /`                | [`home`]      | signed in as …, or a link to sign in              |
//! | `GET/POST /login`      | [`login`]     | local sign-in (double-submit CSRF, throttled)     |
//! | `POST /logout`         | [`login`]     | ends the browser session (CSRF)                   |
//! | `GET /login/oidc`, `GET /login/oidc/callback` | [`oidc_login`] | sign-in at the OIDC issuer → [`crate::identity::oidc::browser_login`] |
//! | `GET/POST /connect/{id}` | [`connect`] | consent for an authorization (owner only, CSRF)   |
//! | `GET /connect/{id}/result` | [`result`] | how a connect link ended (owner only)            |
//! | `GET /oauth/callback/{provider}` | [`callback`] | provider redirect back → [`crate::broker::flow`]; always 303 to a clean page |
//! | `GET /oauth/callback`  | [`callback`]  | the older shared callback, for attempts sent with it |
//! | `GET /oauth/callback/problem/{problem}` | [`callback`] | a refused callback's page (names no authorization) |
//! | `GET /oauth/client-metadata/{provider}` | [`client_metadata`] | the broker's client ID metadata document at an `mcp-oauth` server's authorization server |
//! | `GET /connections`, `POST /connections/…` | [`connections`] | my connections: revoke, withdraw, end an app's access |
//! | `POST /connections/servers/withdraw` | [`server_approvals`] | withdraw a client's approval for a server behind the broker |
//! | `POST /connections/reconnect` | [`reconnect`] | renew a dead or failing connection → `/connect/{id}` |
//! | `POST /connections/key` | [`api_keys`] | replace an API-key connection's key (the connect page's key form too) |
//! | `GET /admin…`, `POST /admin/…` | [`admin`] | operators' dashboard, tables and actions (admins only) |
//!
//! The web's own pages are askama structs in [`pages`]; what every face's pages share is below
//! the faces in [`crate::html`]: each page is rendered through [`crate::html::render`] (HTML,
//! `Cache-Control: no-store`); failures are [`crate::html::PageError`]s, each saying what
//! happened, what to do, and linking home ([`refusal_pages`] words the connect flow's and the
//! sign-in's own refusals). Signed-in pages carry a top bar (home, My connections, Sign out).
//! Names others chose reach a page only through [`crate::display`].

pub mod admin;
pub mod api_keys;
pub mod callback;
pub mod client_metadata;
pub mod connect;
pub mod connections;
pub mod device;
#[cfg(test)]
mod flow_tests;
pub mod home;
pub mod login;
pub mod oidc_login;
pub mod pages;
pub mod reconnect;
mod refusal_pages;
pub mod result;
pub mod server_approvals;
pub mod throttle;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::routing::{get, post};
use tower_http::set_header::SetResponseHeaderLayer;

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(home::show))
        .route("/login", get(login::form).post(login::submit))
        .route("/logout", post(login::logout))
        .route("/logout/everywhere", post(connections::logout_everywhere))
        .route("/connections", get(connections::show))
        .route("/connections/revoke", post(connections::revoke))
        .route("/connections/reconnect", post(reconnect::reconnect))
        .route("/connections/key", post(api_keys::replace))
        .route("/connections/clients/revoke", post(connections::revoke_client))
        .route("/connections/apps/revoke", post(connections::revoke_app))
        .route("/connections/servers/withdraw", post(server_approvals::withdraw))
        .route("/connect/{id}", get(connect::show).post(connect::act))
        .route("/connect/{id}/result", get(result::show))
        .route("/oauth/callback", get(callback::receive))
        .route("/oauth/callback/{provider}", get(callback::receive_for_provider))
        .route("/oauth/callback/problem/{problem}", get(callback::problem))
        .route("/oauth/client-metadata/{provider}", get(client_metadata::show))
        .merge(admin::router())
        // Pages carry CSRF tokens and per-user details; redirects carry provider URLs.
        .layer(SetResponseHeaderLayer::overriding(header::CACHE_CONTROL, HeaderValue::from_static("no-store")))
}
