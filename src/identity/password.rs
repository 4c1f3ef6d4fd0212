//! Local account passwords: argon2id with a random salt (PHC string format).

use argon2::password_hash::SaltString;
use argon2::password_hash::rand_core::OsRng;
use argon2::{Argon2, PasswordHash, PasswordHasher, PasswordVerifier};
use secrecy::{ExposeSecret, SecretString};

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("password must be at least {0} characters")]
    TooShort(usize),
    #[error("could not hash password")]
    Hash,
}

pub const MIN_PASSWORD_LEN: usize = 8;

pub fn hash_password(password: &SecretString) -> Result<String, PasswordError> {
    if password.expose_secret().chars().count() < MIN_PASSWORD_LEN {
        return Err(PasswordError::TooShort(MIN_PASSWORD_LEN));
    }
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.expose_secret().as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|_| PasswordError::Hash)
}

/// Constant-time verification (argon2 compares the derived hash in constant time).
pub fn verify_password(password: &SecretString, stored_hash: &str) -> bool {
    match PasswordHash::new(stored_hash) {
        Ok(parsed) => Argon2::default().verify_password(password.expose_secret().as_bytes(), &parsed).is_ok(),
        Err(_) => false,
    }
}

/// Spends the same time as a real verification, for sign-ins naming an unknown account, so
/// response time does not reveal which accounts exist.
pub fn verify_against_dummy(password: &SecretString) {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let hash = DUMMY.get_or_init(|| {
        hash_password(&SecretString::from("dummy-password-for-timing".to_string())).unwrap_or_default()
    });
    let _ = verify_password(password, hash);
}

/// A random password for generated accounts (the demo user).
pub fn generate_password() -> SecretString {
    SecretString::from(crate::crypto::random_token(15))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hashed_password_verifies_and_a_wrong_one_does_not() {
        let pw = SecretString::from("correct horse battery".to_string());
        let hash = hash_password(&pw).unwrap();
        assert!(hash.starts_with("$argon2id$"));
        assert!(verify_password(&pw, &hash));
        assert!(!verify_password(&SecretString::from("wrong".to_string()), &hash));
        assert!(!verify_password(&pw, "not a hash"));
    }

    #[test]
    fn short_passwords_are_refused() {
        assert!(matches!(hash_password(&SecretString::from("short".to_string())), Err(PasswordError::TooShort(8))));
    }
}
