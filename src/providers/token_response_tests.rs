use secrecy::ExposeSecret;

use super::*;
use crate::domain::ProviderId;
use crate::providers::catalogue::{ProviderFields, resolve};

fn provider(name: &str) -> ProviderConfig {
    let table = ProviderFields { client_id: Some("c".into()), client_secret: Some("s".into()), ..Default::default() };
    resolve(&ProviderId::parse(name).unwrap(), table).unwrap()
}

fn json(p: &ProviderConfig, body: &str) -> Result<TokenSet, ProviderError> {
    parse(p, 200, Some("application/json; charset=utf-8"), body.as_bytes())
}

#[test]
fn a_form_encoded_answer_with_comma_separated_scopes_is_read() {
    let github = provider("github");
    let tokens = parse(
        &github,
        200,
        Some("application/x-www-form-urlencoded; charset=utf-8"),
        b"access_token=gho_abc&scope=repo%2Cgist&token_type=bearer",
    )
    .unwrap();
    assert_eq!(tokens.access_token.expose_secret(), "gho_abc");
    assert_eq!(tokens.scopes.unwrap().to_space_separated(), "gist repo");
    assert!(tokens.refresh_token.is_none() && tokens.expires_in.is_none());
    // Without a content type, too.
    let tokens = parse(&github, 200, None, b"access_token=gho_abc&scope=repo").unwrap();
    assert_eq!(tokens.scopes.unwrap().to_space_separated(), "repo");
}

#[test]
fn an_error_with_http_200_is_an_error() {
    let github = provider("github");
    let form = parse(
        &github,
        200,
        Some("application/x-www-form-urlencoded"),
        b"error=bad_verification_code&error_description=x",
    );
    assert!(matches!(form, Err(ProviderError::InvalidGrant)), "{form:?}");
    let refused = json(&github, r#"{"error":"incorrect_client_credentials"}"#);
    assert!(matches!(refused, Err(ProviderError::Refused { ref error }) if error == "incorrect_client_credentials"));
    let slack = json(&provider("slack"), r#"{"ok":false,"error":"invalid_code"}"#);
    assert!(matches!(slack, Err(ProviderError::InvalidGrant)), "{slack:?}");
    let no_error = json(&provider("slack"), r#"{"ok":false}"#);
    assert!(matches!(no_error, Err(ProviderError::BadResponse)));
}

#[test]
fn expires_in_may_be_a_number_a_string_or_absent() {
    let p = provider("github");
    let secs = |body: &str| json(&p, body).unwrap().expires_in.map(|d| d.as_secs());
    assert_eq!(secs(r#"{"access_token":"a","expires_in":3600}"#), Some(3600));
    assert_eq!(secs(r#"{"access_token":"a","expires_in":"3600"}"#), Some(3600));
    assert_eq!(secs(r#"{"access_token":"a","expires_in":3599.5}"#), Some(3599));
    assert_eq!(secs(r#"{"access_token":"a","expires_in":""}"#), None);
    assert_eq!(secs(r#"{"access_token":"a"}"#), None);
    assert!(json(&p, r#"{"access_token":"a","expires_in":"soon"}"#).is_err());
    assert!(json(&p, r#"{"access_token":"a","expires_in":-5}"#).is_err());
}

#[test]
fn scopes_may_be_empty_a_list_or_urls_with_aliases() {
    let p = provider("github");
    assert!(json(&p, r#"{"access_token":"a","scope":""}"#).unwrap().scopes.is_none(), "empty means as requested");
    let twitch = json(&provider("twitch"), r#"{"access_token":"a","scope":["openid","user:read:email"]}"#).unwrap();
    assert_eq!(twitch.scopes.unwrap().to_space_separated(), "openid user:read:email");
    let google = json(
        &provider("google"),
        r#"{"access_token":"a","scope":"https://www.googleapis.com/auth/userinfo.email openid https://www.googleapis.com/auth/userinfo.profile"}"#,
    )
    .unwrap();
    assert_eq!(google.scopes.unwrap().to_space_separated(), "email openid profile");
    assert!(json(&p, r#"{"access_token":"a","scope":"a\"b"}"#).is_err(), "a malformed scope is not taken");
}

#[test]
fn slack_v2_user_tokens_are_read_from_authed_user() {
    let slack = provider("slack");
    let body = r#"{"ok":true,"app_id":"A1","authed_user":{"id":"U1","scope":"users:read,chat:write","access_token":"xoxp-1","token_type":"user"},"team":{"id":"T1"}}"#;
    let tokens = json(&slack, body).unwrap();
    assert_eq!(tokens.access_token.expose_secret(), "xoxp-1");
    assert_eq!(tokens.scopes.unwrap().to_space_separated(), "chat:write users:read");
    assert!(json(&slack, r#"{"ok":true,"access_token":"xoxb-bot"}"#).is_err(), "a bot token is not the user's");
}

#[test]
fn salesforce_instance_url_becomes_the_api_base_only_under_its_domains() {
    let sf = provider("salesforce");
    let ok = json(&sf, r#"{"access_token":"a","instance_url":"https://acme.my.salesforce.com","id":"x"}"#).unwrap();
    assert_eq!(ok.api_base_url.unwrap().as_str(), "https://acme.my.salesforce.com/services/data/");
    for bad in ["https://evil.example", "http://acme.my.salesforce.com", "https://salesforce.com.evil.example"] {
        let body = format!(r#"{{"access_token":"a","instance_url":"{bad}"}}"#);
        assert!(json(&sf, &body).is_err(), "{bad}");
    }
    assert!(
        json(&provider("github"), r#"{"access_token":"a","instance_url":"https://x"}"#).unwrap().api_base_url.is_none()
    );
}

#[test]
fn the_account_comes_from_the_token_answer_when_there_is_no_userinfo() {
    let notion = provider("notion");
    let body = r#"{"access_token":"a","workspace_name":"Acme","owner":{"type":"user","user":{"id":"u-42"}}}"#;
    let account = json(&notion, body).unwrap().account.unwrap();
    assert_eq!((account.id.as_str(), account.label.as_deref()), ("u-42", Some("Acme")));
    assert!(json(&provider("github"), r#"{"access_token":"a","id":1}"#).unwrap().account.is_none());
}

#[test]
fn non_oauth_answers_are_bad_responses() {
    let p = provider("github");
    for body in ["<html>hi</html>", "", "[1,2]", r#"{"token":"a"}"#] {
        assert!(
            matches!(parse(&p, 200, Some("text/html"), body.as_bytes()), Err(ProviderError::BadResponse)),
            "{body}"
        );
    }
    assert!(matches!(parse(&p, 400, Some("application/json"), b"{}"), Err(ProviderError::BadResponse)));
}
