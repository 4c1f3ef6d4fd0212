//! [`SignedIn`]: who is signed in, as every signed-in page shows it in its top bar.

use crate::display::safe_text;
use crate::identity::browser::BrowserSession;

/// Who is signed in: the top bar of signed-in pages (`templates/nav_signed_in.html`: home, My
/// connections, Sign out) and the forms that need the session's CSRF token.
#[derive(Debug, Clone)]
pub struct SignedIn {
    /// Display text ([`crate::display::safe_text`]).
    pub username: String,
    pub csrf_token: String,
    /// The top bar then links to the admin pages.
    pub admin: bool,
}

impl SignedIn {
    pub fn of(session: &BrowserSession) -> Self {
        SignedIn {
            username: safe_text(session.display_name()),
            csrf_token: session.csrf_token.clone(),
            admin: session.user.is_admin(),
        }
    }
}
