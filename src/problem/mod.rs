//! What a registered service is told when it does not get what it asked for, shared below the
//! faces by the token API (`crate::api`, as `application/problem+json`) and the token exchange
//! at the authorization server's `/token` (`crate::authorization_server`, as an RFC 6749 §5.2
//! error): one wording, one code and one status for each refusal, whichever endpoint answers.
//!
//! | file           | what                                                                   |
//! |----------------|------------------------------------------------------------------------|
//! | [`details`]    | [`Problem`]: RFC 9457 problem details, their constructors by code and both shapes |
//! | [`refusals`]   | the core's and identity's refusals of a service, as problems           |

pub mod details;
pub mod refusals;

pub use details::{AuthorizationLink, Problem, TYPE_PREFIX};
