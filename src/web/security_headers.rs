//! Headers on every response: no framing, no sniffing, no referrer (the callback URL carries a
//! code), a strict CSP for our pages.
//!
//! `form-action` must allow other origins: Chrome applies it to the redirect that follows the
//! consent form's POST, and that redirect goes to the provider's authorization endpoint.

use axum::http::{HeaderName, HeaderValue};
use tower::ServiceBuilder;
use tower::layer::util::{Identity, Stack};
use tower_http::set_header::SetResponseHeaderLayer;

type L = SetResponseHeaderLayer<HeaderValue>;
/// Four header layers, innermost first.
type Headers = Stack<L, Stack<L, Stack<L, Stack<L, Identity>>>>;

pub fn layer() -> ServiceBuilder<Headers> {
    ServiceBuilder::new()
        .layer(header("x-frame-options", "DENY"))
        .layer(header("x-content-type-options", "nosniff"))
        // RFC 9700 §4.2.4: the callback URL carries a code; never send it onwards.
        .layer(header("referrer-policy", "no-referrer"))
        // MCP security best practices §Confused deputy: consent pages must not be framed.
        .layer(header(
            "content-security-policy",
            "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; form-action 'self' *; frame-ancestors 'none'; base-uri 'none'",
        ))
}

fn header(name: &'static str, value: &'static str) -> L {
    SetResponseHeaderLayer::if_not_present(HeaderName::from_static(name), HeaderValue::from_static(value))
}
