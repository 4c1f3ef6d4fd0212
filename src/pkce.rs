//! PKCE verification for the broker's two authorization servers (its own, and the demo
//! provider): S256 only (RFC 7636; OAuth 2.1 §7.5.2 and MCP 2025-11-25 authorization require
//! it). `plain` is refused so a client that would fall back to it is caught.

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

/// RFC 7636 §4.6: the server recomputes the challenge from the verifier and compares.
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
    fn the_rfc_7636_appendix_b_example_verifies() {
        assert_eq!(s256(VERIFIER), CHALLENGE);
        assert!(verify(VERIFIER, CHALLENGE));
        assert!(is_valid_challenge(CHALLENGE));
    }

    #[test]
    fn a_different_verifier_or_plain_challenge_does_not_verify() {
        let other = VERIFIER.replace('d', "e");
        assert!(!verify(&other, CHALLENGE));
        assert!(!verify(VERIFIER, VERIFIER), "the plain method is not accepted");
    }

    #[test]
    fn verifiers_must_be_43_to_128_unreserved_characters() {
        assert!(is_valid_verifier(&"a".repeat(43)));
        assert!(is_valid_verifier(&"~._-".repeat(32)));
        assert!(!is_valid_verifier(&"a".repeat(42)));
        assert!(!is_valid_verifier(&"a".repeat(129)));
        assert!(!is_valid_verifier(&format!("{}+", "a".repeat(43))));
        let short = &VERIFIER[..42];
        assert!(!verify(short, &s256(short)), "a 42-character verifier is refused even if it hashes right");
    }

    #[test]
    fn challenges_must_look_like_a_sha256_digest() {
        assert!(!is_valid_challenge(&CHALLENGE[..42]));
        assert!(!is_valid_challenge(&format!("{}=", &CHALLENGE[..42])));
    }
}
