//! PKCE, S256 only (RFC 7636; OAuth 2.1 §7.5.2 and MCP 2025-11-25 authorization require it).
//! `plain` is refused so a client that would fall back to it is caught.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use crate::crypto::constant_time_eq;

/// RFC 7636 §4.1: 43–128 characters of `[A-Z] / [a-z] / [0-9] / "-" / "." / "_" / "~"`.
pub fn is_valid_verifier(verifier: &str) -> bool {
    (43..=128).contains(&verifier.len())
        && verifier.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// An S256 challenge is the unpadded base64url of 32 bytes: exactly 43 characters.
pub fn is_valid_challenge(challenge: &str) -> bool {
    challenge.len() == 43 && challenge.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

/// RFC 7636 §4.2: `BASE64URL-ENCODE(SHA256(ASCII(code_verifier)))`.
pub fn s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// RFC 7636 §4.6: recompute the challenge from the verifier and compare in constant time.
pub fn verify(verifier: &str, challenge: &str) -> bool {
    is_valid_verifier(verifier) && constant_time_eq(s256(verifier).as_bytes(), challenge.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 7636 Appendix B.
    const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

    #[test]
    fn the_rfc_7636_example_verifies_and_nothing_else_does() {
        assert_eq!(s256(VERIFIER), CHALLENGE);
        assert!(verify(VERIFIER, CHALLENGE));
        assert!(is_valid_challenge(CHALLENGE));
        assert!(!verify(&VERIFIER.replace('d', "e"), CHALLENGE));
        assert!(!verify(VERIFIER, VERIFIER), "plain is not accepted");
        assert!(!is_valid_verifier(&"a".repeat(42)));
        assert!(!is_valid_challenge(&CHALLENGE[..42]));
    }
}
