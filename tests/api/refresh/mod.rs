//! Refreshing provider tokens: before use, once per grant under concurrency, on one instance or
//! two, through backoff and faults.

mod backoff;
mod cluster;
mod expired_tokens;
mod faults;
