//! Organizations and who belongs to them. One broker serves many organizations; a user (an
//! identity) may belong to several, as a member or an admin of each.
//!
//! - [`orgs`]: the `organizations` rows, read and changed through [`Organizations`]
//!   (`store.organizations()`), the operator's view across all of them;
//! - [`members`]: one organization's people, through [`Members`]
//!   (`store.in_org(&org).members()`): the organization is in the handle, so no statement of it
//!   can leave the organization out;
//! - [`apps`]: one organization's own OAuth apps per provider, in versions
//!   (`store.in_org(&org).provider_apps()`).

pub(in crate::store) mod apps;
pub(in crate::store) mod members;
pub(in crate::store) mod orgs;

pub use apps::{NewProviderApp, ProviderApp, ProviderApps};
pub use members::{Joined, Member, Members};
pub use orgs::{InOrg, Organization, Organizations};
