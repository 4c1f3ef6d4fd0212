//! Headers on every response: no framing, no sniffing, no referrer (the callback URL carries a
//! code), a strict CSP for our pages.
//!
//! `form-action` is `'self'` everywhere: a form of ours may only post to the broker. Chrome also
//! applies `form-action` to the redirect that answers a form's POST, so the pages whose POST is
//! answered by a redirect elsewhere widen it for themselves with [`allow_form_redirects_to`]:
//! the provider consent page (to that provider's authorization endpoint), the authorization
//! server's consent page (to that client's redirect URI) and the demo provider's approve page
//! (to the broker's callback). No page allows any other origin, so an injected form cannot send
//! what a user types to a third party.

use axum::http::{HeaderName, HeaderValue, header};
use axum::response::Response;
use tower::ServiceBuilder;
use tower::layer::util::{Identity, Stack};
use tower_http::set_header::SetResponseHeaderLayer;
use url::Url;

type L = SetResponseHeaderLayer<HeaderValue>;
/// Four header layers, innermost first.
type Headers = Stack<L, Stack<L, Stack<L, Stack<L, Identity>>>>;

/// Everything but `form-action`, which [`policy`] adds.
const POLICY_BASE: &str = "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'";

pub fn layer() -> ServiceBuilder<Headers> {
    ServiceBuilder::new()
        .layer(header("x-frame-options", "DENY"))
        .layer(header("x-content-type-options", "nosniff"))
        // RFC 9700 §4.2.4: the callback URL carries a code; never send it onwards.
        .layer(header("referrer-policy", "no-referrer"))
        // MCP security best practices §Confused deputy: consent pages must not be framed. Only
        // set when the page did not choose its own (see `allow_form_redirects_to`).
        .layer(SetResponseHeaderLayer::if_not_present(header::CONTENT_SECURITY_POLICY, default_policy()))
}

fn header(name: &'static str, value: &'static str) -> L {
    SetResponseHeaderLayer::if_not_present(HeaderName::from_static(name), HeaderValue::from_static(value))
}

fn default_policy() -> HeaderValue {
    policy(&[])
}

/// The CSP with `form-action 'self'` plus `targets` (CSP source expressions).
fn policy(targets: &[String]) -> HeaderValue {
    let mut text = format!("{POLICY_BASE}; form-action 'self'");
    for target in targets {
        text.push(' ');
        text.push_str(target);
    }
    // Sources come from `source_of` (URL-serialised origins or schemes): always a valid value.
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("default-src 'none'"))
}

/// The CSP source expression that matches `url`'s origin: `https://host:port` for web URLs, or
/// `scheme:` for a native app's private-use scheme (RFC 8252 §7.1), whose origin is opaque.
fn source_of(url: &Url) -> Option<String> {
    let origin = url.origin();
    if origin.is_tuple() {
        Some(origin.ascii_serialization())
    } else {
        // A scheme is [a-z][a-z0-9+.-]* once parsed, so it cannot break out of the header.
        Some(format!("{}:", url.scheme())).filter(|s| s.len() > 1)
    }
}

/// Lets the forms on this page be answered with a redirect to these URLs' origins (and nothing
/// else beyond the broker itself).
pub fn allow_form_redirects_to<'a>(response: &mut Response, urls: impl IntoIterator<Item = &'a Url>) {
    let mut targets: Vec<String> = urls.into_iter().filter_map(source_of).collect();
    targets.sort();
    targets.dedup();
    response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, policy(&targets));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csp_with(urls: &[&str]) -> String {
        let urls: Vec<Url> = urls.iter().map(|u| Url::parse(u).unwrap()).collect();
        let mut response = Response::new(axum::body::Body::empty());
        allow_form_redirects_to(&mut response, &urls);
        response.headers()[header::CONTENT_SECURITY_POLICY].to_str().unwrap().to_owned()
    }

    #[test]
    fn the_default_policy_lets_forms_post_to_the_broker_only() {
        let csp = default_policy().to_str().unwrap().to_owned();
        assert!(csp.contains("form-action 'self';") || csp.ends_with("form-action 'self'"), "{csp}");
        assert!(!csp.contains('*'), "{csp}");
    }

    #[test]
    fn form_redirect_targets_are_origins_only() {
        let csp = csp_with(&["https://github.com/login/oauth/authorize?x=1", "http://127.0.0.1:5173/cb"]);
        assert!(csp.ends_with("form-action 'self' http://127.0.0.1:5173 https://github.com"), "{csp}");
        assert!(csp.starts_with(POLICY_BASE), "the rest of the policy stays: {csp}");
    }

    #[test]
    fn a_private_use_scheme_redirect_allows_that_scheme_only() {
        let csp = csp_with(&["com.example.app:/oauth2redirect", "cursor://anysphere.cursor-mcp/oauth/callback"]);
        assert!(csp.ends_with("form-action 'self' com.example.app: cursor:"), "{csp}");
    }
}
