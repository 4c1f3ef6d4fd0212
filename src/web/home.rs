//! `GET /`: who is signed in (the top bar has My connections and Sign out), or a link to sign in.

use axum::http::StatusCode;
use axum::response::Response;

use super::pages::HomePage;
use crate::html::{self, SignedIn};
use crate::identity::browser::OptionalBrowserSession;

pub async fn show(OptionalBrowserSession(session): OptionalBrowserSession) -> Response {
    let signed_in = session.as_ref().map(SignedIn::of);
    html::render(StatusCode::OK, &HomePage { signed_in })
}
