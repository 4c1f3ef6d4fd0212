//! Errors that keep their cause, and writing the whole chain in a log line.
//!
//! A face shows a user at most an error's own message (an internal one, not even that); the
//! log needs what lies under it. `tracing`'s JSON output writes only the message of an error
//! logged with `%error`, so log lines write `error = %Chain(&error)`: `outer: cause: root`.

use std::error::Error;
use std::fmt;

/// A cause of any type, kept as the source of an internal error.
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// What failed, with the error that made it fail: `what: cause` in a [`Chain`]. For an internal
/// error whose cause alone would not say what the broker was doing.
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct Because {
    what: &'static str,
    #[source]
    cause: BoxError,
}

/// [`Because`], boxed.
pub fn because(what: &'static str, cause: impl Into<BoxError>) -> BoxError {
    Box::new(Because { what, cause: cause.into() })
}

/// Writes an error and each of its sources, `: `-separated, skipping a source whose message the
/// one above already ends with (an error that writes its source into its own message).
pub struct Chain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut above = self.0.to_string();
        f.write_str(&above)?;
        let mut next = self.0.source();
        while let Some(cause) = next {
            let message = cause.to_string();
            if !above.ends_with(&message) {
                write!(f, ": {message}")?;
            }
            above = message;
            next = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("could not store the grant")]
    struct Outer(#[source] Middle);

    #[derive(Debug, thiserror::Error)]
    #[error("the database said: {0}")]
    struct Middle(#[source] std::io::Error);

    #[test]
    fn the_chain_names_every_cause_once() {
        let error = Outer(Middle(std::io::Error::other("disk full")));
        assert_eq!(Chain(&error).to_string(), "could not store the grant: the database said: disk full");
        let wrapped = because("could not open the verifier", std::io::Error::other("bad tag"));
        assert_eq!(Chain(&*wrapped).to_string(), "could not open the verifier: bad tag");
        let alone = std::io::Error::other("alone");
        assert_eq!(Chain(&alone).to_string(), "alone");
    }
}
