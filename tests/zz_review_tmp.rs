#[path = "api/helpers.rs"]
#[allow(dead_code)]
mod helpers;
#[path = "api/review.rs"]
mod review;

#[test]
fn scratch_resolve_path() {
    use oauth_broker::oauth::api::resolve_path;
    let base = url::Url::parse("https://api.example.com/v1/").unwrap();
    for p in [
        "..;/admin",
        "%2e%2e;/x",
        "%252e%252e/x",
        "a/..%00/x",
        "http:evil.example/x",
        "https:evil.example/x",
        "HTTPS:/evil.example",
        "\u{3002}\u{3002}/x",
        "a/.%2E/x",
        "foo:bar",
        "%2F%2Fevil.example",
        "/%5C%5Cevil",
        "@evil.example",
        "a/%2e%2e%2f%2e%2e/x",
        "..%2fadmin",
        "a/..\t/x",
        "a/\u{FF0E}\u{FF0E}/x",
        "a?",
        "%3F",
    ] {
        println!("{p:?} => {:?}", resolve_path(&base, p).map(|u| u.to_string()));
    }
}
