//! Organizations: one broker, many organizations, each with its own people and services.
//!
//! - `people`: organizations and memberships through the store and the operator's CLI, on both
//!   backends — the default organization every upgraded database's users are in, joining,
//!   roles, leaving, lists that page, and bad input refused with nothing written;
//! - `isolation`: a service of one organization cannot act for a user of another, on every path
//!   of the token API (`/v1/tokens`, `/v1/proxy`, `/v1/connections`, the RFC 8693 exchange at
//!   `/token`), refused exactly as a user who does not exist and at no provider's cost;
//! - `pages`: the operator's admin pages of organizations and their members;
//! - `leaving`: a service's webhook hears nothing of people outside its organization, and a
//!   member who leaves cannot finish a link for its services; their consents go;
//! - `apps`: each organization's own OAuth app per provider (bring your own app): connections
//!   made and refreshed with it, new versions for new connections, the operator's app shared or
//!   kept to the default organization, bad settings refused.

mod apps;
mod isolation;
mod leaving;
mod pages;
mod people;
