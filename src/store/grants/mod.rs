//! What a user connected: grants (their sealed tokens for one account at one provider) and the
//! clients they allowed to use each one.
//!
//! - [`row`]: a grant as stored and as the broker sees it, and its handle [`Grants`];
//! - [`reads`]: reading grants by key, id, user or provider;
//! - [`writes`]: storing, marking and deleting grants;
//! - [`refresh`]: the refresh lease, the gate after failures, and storing what a refresh brought;
//! - [`refresh_failure`]: why a grant's last refresh failed;
//! - [`accounts`]: which account at the provider a grant is (its stable id, its API base);
//! - [`with_consent`]: a grant read with one client's consent, as every tool call reads it;
//! - [`cache`]: those reads kept between tool calls;
//! - [`list`]: the admin grants list, and the grants' text other lists search by;
//! - [`sealed`]: a grant's sealed values, rewrapped or given up with their key;
//! - [`consents`]: client consents (`client_consents`), a user's permission for one client to
//!   use one of their connections ([`Consents`]).

pub(in crate::store) mod accounts;
pub(in crate::store) mod cache;
pub(in crate::store) mod consents;
pub(in crate::store) mod list;
pub(in crate::store) mod reads;
pub(in crate::store) mod refresh;
pub(in crate::store) mod refresh_failure;
pub(in crate::store) mod row;
pub(in crate::store) mod sealed;
pub(in crate::store) mod with_consent;
pub(in crate::store) mod writes;

pub use consents::{ConsentRow, Consents, NewConsent, RecordConsent};
pub use refresh::{Lease, RecordRefreshFailure, StoreRefreshedTokens};
pub use refresh_failure::RefreshFailure;
pub use row::{GrantRow, GrantStatus, Grants, REFRESH_WINDOW_SECONDS, RefreshGate, SealedTokens};
pub use sealed::SealedGrant;
pub use with_consent::GrantWithConsent;
pub use writes::{DeleteGrant, NewGrant, SetGrantStatus, UpsertGrant};
