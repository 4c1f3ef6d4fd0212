//! Headers on every response: no framing, no sniffing, no referrer (the callback URL carries a
//! code), a strict CSP for our pages.

use axum::http::{HeaderName, HeaderValue};
use tower::ServiceBuilder;
use tower::layer::util::Stack;
use tower_http::set_header::SetResponseHeaderLayer;

type L = SetResponseHeaderLayer<HeaderValue>;

pub fn layer() -> ServiceBuilder<Stack<L, Stack<L, Stack<L, Stack<L, tower::layer::util::Identity>>>>> {
    ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::if_not_present(HeaderName::from_static("x-frame-options"), HeaderValue::from_static("DENY")))
        .layer(SetResponseHeaderLayer::if_not_present(HeaderName::from_static("x-content-type-options"), HeaderValue::from_static("nosniff")))
        .layer(SetResponseHeaderLayer::if_not_present(HeaderName::from_static("referrer-policy"), HeaderValue::from_static("no-referrer")))
        .layer(SetResponseHeaderLayer::if_not_present(
            HeaderName::from_static("content-security-policy"),
            HeaderValue::from_static("default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; form-action 'self' *; frame-ancestors 'none'; base-uri 'none'"),
        ))
}
