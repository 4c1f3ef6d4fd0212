//! The browser leg of the authorization flow.
