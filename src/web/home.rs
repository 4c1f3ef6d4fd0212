//! `GET /`: who is signed in, with a sign-out button, or a link to sign in.

use axum::http::StatusCode;
use axum::response::Response;

use super::pages::{self, HomePage, SignedIn};
use crate::identity::browser::OptionalBrowserSession;

pub async fn show(OptionalBrowserSession(session): OptionalBrowserSession) -> Response {
    let signed_in =
        session.map(|s| SignedIn { username: s.display_name().to_owned(), csrf_token: s.csrf_token.clone() });
    pages::render(StatusCode::OK, &HomePage { signed_in })
}
