//! What every face's HTML pages share, kept below the faces: the hosted pages (`crate::web`),
//! the authorization server's consent page and the demo provider's approve page all render,
//! refuse and protect their forms the same way, and none of them imports another.
//!
//! | file                  | what                                                                 |
//! |-----------------------|----------------------------------------------------------------------|
//! | [`render`]            | [`render()`]: HTML, `Cache-Control: no-store`; [`see_other`] after a POST |
//! | [`message`]           | the message page: what happened, what to do now, a link home         |
//! | [`signed_in`]         | [`SignedIn`]: who is signed in, for the top bar of signed-in pages    |
//! | [`page_error`]        | [`PageError`]: every failure a browser meets, as a page; 404 for no route |
//! | [`top_bar`]           | error pages rendered again with the top bar for a signed-in browser  |
//! | [`csrf`]              | the session's and the sign-in form's CSRF tokens                     |
//! | [`security_headers`]  | headers on every response; a page's own `form-action` targets        |
//!
//! Templates are in `templates/`, all extending `base.html`. Names others chose reach a page
//! only through [`crate::display`].

pub mod csrf;
pub mod message;
pub mod page_error;
pub mod render;
pub mod security_headers;
pub mod signed_in;
pub mod top_bar;

pub use message::{MessagePage, ShownMessage, SignOutForm, message, render_message};
pub use page_error::{PageError, START_AGAIN};
pub use render::{render, see_other};
pub use signed_in::SignedIn;
