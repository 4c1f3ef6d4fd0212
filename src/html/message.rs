//! The message page (`templates/message.html`): results, refusals and errors, each saying what
//! happened and what to do now, with a link home; a signed-in browser sees it with its top bar
//! ([`super::top_bar`]).

use askama::Template;
use axum::http::StatusCode;
use axum::response::Response;

use super::render::render;
use super::signed_in::SignedIn;

/// A sign-out button on a page (used where the fix is "sign in as someone else").
#[derive(Debug, Clone)]
pub struct SignOutForm {
    /// The browser session's CSRF token.
    pub csrf_token: String,
    /// Where to go after signing out (a local path; checked again on submit).
    pub next: String,
}

/// Results, refusals and errors: a title, what happened in plain words, what to do now, and a
/// link home.
#[derive(Template, Debug, Clone)]
#[template(path = "message.html")]
pub struct MessagePage {
    pub title: String,
    /// What happened.
    pub message: String,
    /// What to do now.
    pub next_step: String,
    pub sign_out: Option<SignOutForm>,
    /// Who is signed in, when the page is for them (the top bar then offers My connections and
    /// Sign out).
    pub signed_in: Option<SignedIn>,
}

/// The message page a response carries, kept beside its rendered body so a later layer
/// ([`super::top_bar::top_bar_on_error_pages`]) can render it again for a signed-in browser.
#[derive(Clone)]
pub struct ShownMessage(pub std::sync::Arc<MessagePage>);

/// [`render`] for a message page, which a signed-in browser then sees with its top bar.
pub fn render_message(status: StatusCode, page: MessagePage) -> Response {
    let mut response = render(status, &page);
    response.extensions_mut().insert(ShownMessage(std::sync::Arc::new(page)));
    response
}

/// A message page with `status`: what happened, and what to do now.
pub fn message(
    status: StatusCode,
    title: impl Into<String>,
    message: impl Into<String>,
    next_step: impl Into<String>,
) -> Response {
    let page = MessagePage {
        title: title.into(),
        message: message.into(),
        next_step: next_step.into(),
        sign_out: None,
        signed_in: None,
    };
    render_message(status, page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_escape_what_they_show() {
        let html = MessagePage {
            title: "t".into(),
            message: "<script>x</script>".into(),
            next_step: "n".into(),
            sign_out: None,
            signed_in: None,
        }
        .render()
        .unwrap();
        assert!(!html.contains("<script>x"));
        assert!(html.contains("&#60;script&#62;") || html.contains("&lt;script&gt;"));
    }
}
