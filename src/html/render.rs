//! The one way a page is sent: HTML, `Cache-Control: no-store` (pages carry CSRF tokens and
//! per-user details); and the one way a browser is sent on after a POST (303 See Other).
//! Values are HTML-escaped by askama; never pass a secret to a page.

use askama::Template;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

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
    use crate::html::message::message;

    #[test]
    fn rendered_pages_are_not_cached() {
        let response = message(StatusCode::OK, "t", "m", "n");
        assert_eq!(response.headers()[header::CACHE_CONTROL], "no-store");
        assert!(response.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/html"));
    }
}
