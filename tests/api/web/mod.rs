//! The hosted pages: sign-in, consent, the callback, the connections page and the admin console,
//! in a cookie-keeping HTTP client and in a real browser, and the attacks on them.

mod admin;
mod admin_paging;
mod browser;
mod concurrent_callbacks;
mod console;
mod console_filters;
mod csp;
mod keep_alive;
mod pages;
mod security;
mod sign_in_guessing;
