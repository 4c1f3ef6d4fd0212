//! The servers behind the broker and their lists, as this instance serves them:
//!
//! - [`registry`]: the registered servers, each with its cached tool list and what the broker
//!   learned of it; [`reload`]: kept current when the database says they changed.
//! - [`lists`]: each server's prompts, resources and templates, cached like its tools;
//!   [`listed`]: how they are listed; [`uri`]: the URI scheme its resources are listed under.
//! - [`shared_lists`]: the lists as last read, kept in the database for every instance and for
//!   the next start, so no instance lists only a connect tool for a server another has read;
//!   [`list_versions`]: which stored version each cached list is.
//! - [`reread`]: every server's lists read again each `list_refresh` over an open connection,
//!   for the servers that cannot announce a change (stateless ones, closed sessions).
//! - [`news`]: what a connection reports about its server (a list changed, a resource changed).
//! - [`own_listing`]: when a user's own resources lists leave a server out after it did not
//!   answer them, and the gathering of announced changes.

pub mod list_versions;
pub mod listed;
pub mod lists;
pub mod news;
pub mod own_listing;
pub mod registry;
pub mod reload;
pub mod reread;
pub mod shared_lists;
pub mod uri;
