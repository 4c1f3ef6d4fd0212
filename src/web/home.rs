//! `GET /`: who is signed in (the top bar has My connections and Sign out), or a link to sign in.

use axum::http::StatusCode;
use axum::response::Response;

use super::pages::{self, HomePage, SignedIn};
use crate::identity::browser::OptionalBrowserSession;

pub async fn show(OptionalBrowserSession(session): OptionalBrowserSession) -> Response {
    let signed_in = session.as_ref().map(SignedIn::of);
    pages::render(StatusCode::OK, &HomePage { signed_in })
}
