//! Secrets at rest and random values.
//!
//! Tokens, PKCE verifiers and signing keys are sealed with AES-256-GCM before they reach the
//! database. A sealed blob is `v1 ‖ key_id(8) ‖ nonce(12) ‖ ciphertext+tag`, and the AAD names
//! the table, column and row it belongs to, so a blob copied into another row (another user's
//! grant, say) fails to open. Several keys can be loaded: the first seals, all of them open, which
//! is what key rotation needs (after rust-lang/crates.io `crates_io_encryption` and Vault transit).
//!
//! Random 96-bit nonces are safe for about 2^32 encryptions per key (SP 800-38D); a broker seals
//! a handful of values per authorization, far below that.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use rand::rngs::OsRng;
use secrecy::{ExposeSecret, SecretBox, SecretString};
use sha2::{Digest, Sha256};
use std::sync::Arc;

const VERSION: u8 = 1;
const KEY_ID_LEN: usize = 8;
const NONCE_LEN: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum CryptoError {
    #[error("an encryption key must be exactly 32 bytes (base64 or hex encoded), got {0} bytes")]
    BadKeyLength(usize),
    #[error("the encryption key is neither base64 nor hex")]
    BadKeyEncoding,
    #[error("sealed value uses unknown format version {0}")]
    UnknownVersion(u8),
    #[error("sealed value is truncated")]
    Truncated,
    #[error("sealed value was made with key {0}, which is not loaded")]
    UnknownKey(String),
    #[error("sealed value failed authentication (tampered, or bound to another row)")]
    Tampered,
}

/// One AES-256 key with its id (a hash of the key, so the id reveals nothing useful).
struct SealingKey {
    id: [u8; KEY_ID_LEN],
    cipher: Aes256Gcm,
}

impl SealingKey {
    fn new(raw: &[u8]) -> Result<Self, CryptoError> {
        if raw.len() != 32 {
            return Err(CryptoError::BadKeyLength(raw.len()));
        }
        let digest = Sha256::new().chain_update(b"oauth-broker sealing key id\0").chain_update(raw).finalize();
        let mut id = [0u8; KEY_ID_LEN];
        id.copy_from_slice(&digest[..KEY_ID_LEN]);
        let cipher = Aes256Gcm::new_from_slice(raw).map_err(|_| CryptoError::BadKeyLength(raw.len()))?;
        Ok(Self { id, cipher })
    }
}

/// Reads the keys again: the active key first, then the retired ones (see
/// [`crate::startup::load_sealer`], which knows where they live).
pub type KeyLoader = Box<dyn Fn() -> Result<Vec<SecretBox<Vec<u8>>>, String> + Send + Sync>;

/// Reloads triggered by a value under one unknown key id are at most this frequent once a
/// reload did not find it, so a corrupt row read in a loop does not turn into a file read per
/// request. A key id not looked for before always triggers a reload at once: that is another
/// process's rotation reaching us, and a periodic reload just before must not delay it.
const RELOAD_AT_MOST_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Seals and opens secrets. The first key seals; every key opens.
///
/// A running server can learn keys without a restart ([`Sealer::reload`], `admin keys rotate`):
/// the ring only grows in a process (a reload adds keys and may change the active one, never
/// forgets one), so a value sealed under a key that was just retired still opens here.
pub struct Sealer {
    ring: std::sync::RwLock<Arc<Vec<Arc<SealingKey>>>>,
    /// For secrets derived from the key the process started with (never used to seal): they
    /// stay stable for the life of the process even when a reload changes the active key.
    derive: hkdf::Hkdf<Sha256>,
    loader: Option<KeyLoader>,
    /// Key ids a reload looked for and did not find, with when ([`RELOAD_AT_MOST_EVERY`]).
    missing: std::sync::Mutex<std::collections::HashMap<[u8; KEY_ID_LEN], std::time::Instant>>,
}

/// Above this many remembered missing key ids the memory starts again (values under random
/// ids are corrupt rows; a real key id is looked for again at worst once more).
const MISSING_REMEMBERED: usize = 64;

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("active_key_id", &self.active_key_id())
            .field("keys", &self.ring().len())
            .finish()
    }
}

/// Where a sealed value lives; becomes the AAD.
#[derive(Debug, Clone, Copy)]
pub struct SealContext<'a> {
    pub table: &'a str,
    pub column: &'a str,
    pub row_id: &'a str,
    pub owner: &'a str,
}

impl SealContext<'_> {
    fn aad(&self) -> Vec<u8> {
        // NUL separators: none of the parts may contain NUL, so the encoding is unambiguous.
        [self.table, self.column, self.row_id, self.owner].join("\0").into_bytes()
    }
}

impl Sealer {
    /// `active` seals; `retired` keys only open values sealed before a rotation.
    pub fn new(active: &[u8], retired: &[&[u8]]) -> Result<Self, CryptoError> {
        let mut keys = vec![Arc::new(SealingKey::new(active)?)];
        for raw in retired {
            keys.push(Arc::new(SealingKey::new(raw)?));
        }
        Ok(Self {
            ring: std::sync::RwLock::new(Arc::new(keys)),
            derive: hkdf::Hkdf::<Sha256>::new(Some(b"oauth-broker derived secrets"), active),
            loader: None,
            missing: std::sync::Mutex::new(std::collections::HashMap::new()),
        })
    }

    /// A sealer that can read its keys again ([`Sealer::reload`]): `loader` gives the active
    /// key first, then the retired ones.
    pub fn with_loader(loader: KeyLoader) -> Result<Self, String> {
        let keys = loader()?;
        let (active, retired) = keys.split_first().ok_or("no encryption key")?;
        let retired: Vec<&[u8]> = retired.iter().map(|k| k.expose_secret().as_slice()).collect();
        let mut sealer = Self::new(active.expose_secret(), &retired).map_err(|e| e.to_string())?;
        sealer.loader = Some(loader);
        Ok(sealer)
    }

    fn ring(&self) -> Arc<Vec<Arc<SealingKey>>> {
        // A panic while holding the lock cannot leave the ring half-written (it is swapped
        // whole), so a poisoned lock still holds a usable ring.
        self.ring.read().map_or_else(|poisoned| poisoned.into_inner().clone(), |ring| ring.clone())
    }

    /// Reads the keys again (after `admin keys rotate`): the loader's active key seals from now
    /// on, its retired keys open, and every key loaded before keeps opening. Whether the active
    /// key changed. Without a loader (keys given in code) nothing changes.
    pub fn reload(&self) -> Result<bool, String> {
        let Some(loader) = &self.loader else { return Ok(false) };
        let loaded = loader()?;
        let before = self.ring();
        let mut keys = Vec::with_capacity(loaded.len() + before.len());
        for raw in &loaded {
            let key = SealingKey::new(raw.expose_secret()).map_err(|e| e.to_string())?;
            if !keys.iter().any(|k: &Arc<SealingKey>| k.id == key.id) {
                keys.push(Arc::new(key));
            }
        }
        if keys.is_empty() {
            return Err("no encryption key".into());
        }
        for old in before.iter() {
            if !keys.iter().any(|k| k.id == old.id) {
                keys.push(old.clone());
            }
        }
        let changed = keys[0].id != before[0].id;
        let active = hex::encode(keys[0].id);
        match self.ring.write() {
            Ok(mut ring) => *ring = Arc::new(keys),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(keys),
        }
        if changed {
            tracing::info!(active_key = %active, "encryption keys reloaded; a new key seals from now on");
        }
        Ok(changed)
    }

    /// The id (hex) a key has, as sealed values name it.
    pub fn id_of_key(raw: &[u8]) -> Result<String, CryptoError> {
        Ok(hex::encode(SealingKey::new(raw)?.id))
    }

    /// Ids (hex) of every key this process can open with, the active one first.
    pub fn key_ids(&self) -> Vec<String> {
        self.ring().iter().map(|k| hex::encode(k.id)).collect()
    }

    /// Parses a key written as base64 (standard or URL-safe) or hex.
    pub fn parse_key(encoded: &SecretString) -> Result<SecretBox<Vec<u8>>, CryptoError> {
        let text = encoded.expose_secret().trim();
        let bytes = if text.len() == 64 && text.chars().all(|c| c.is_ascii_hexdigit()) {
            hex::decode(text).map_err(|_| CryptoError::BadKeyEncoding)?
        } else {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .or_else(|_| URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')))
                .map_err(|_| CryptoError::BadKeyEncoding)?
        };
        if bytes.len() != 32 {
            return Err(CryptoError::BadKeyLength(bytes.len()));
        }
        Ok(SecretBox::new(Box::new(bytes)))
    }

    /// A fresh random key, base64 encoded (for `data_dir/encryption.key`).
    pub fn generate_key() -> SecretString {
        let mut raw = [0u8; 32];
        OsRng.fill_bytes(&mut raw);
        SecretString::from(base64::engine::general_purpose::STANDARD.encode(raw))
    }

    pub fn active_key_id(&self) -> String {
        hex::encode(self.ring()[0].id)
    }

    /// Whether a blob sealed under key `key_id` (hex) can be opened: the active key or a
    /// retired one.
    pub fn knows_key(&self, key_id: &str) -> bool {
        self.ring().iter().any(|k| hex::encode(k.id) == key_id)
    }

    pub fn seal(&self, plaintext: &[u8], ctx: SealContext<'_>) -> Vec<u8> {
        let ring = self.ring();
        let key = &ring[0];
        let mut nonce = [0u8; NONCE_LEN];
        OsRng.fill_bytes(&mut nonce);
        let aad = ctx.aad();
        // Encryption with a valid 32-byte key and 12-byte nonce cannot fail for inputs this size.
        let ciphertext =
            key.cipher.encrypt(Nonce::from_slice(&nonce), Payload { msg: plaintext, aad: &aad }).unwrap_or_default();
        let mut out = Vec::with_capacity(1 + KEY_ID_LEN + NONCE_LEN + ciphertext.len());
        out.push(VERSION);
        out.extend_from_slice(&key.id);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ciphertext);
        out
    }

    pub fn open(&self, sealed: &[u8], ctx: SealContext<'_>) -> Result<Vec<u8>, CryptoError> {
        let (&version, rest) = sealed.split_first().ok_or(CryptoError::Truncated)?;
        if version != VERSION {
            return Err(CryptoError::UnknownVersion(version));
        }
        if rest.len() < KEY_ID_LEN + NONCE_LEN + 16 {
            return Err(CryptoError::Truncated);
        }
        let (key_id, rest) = rest.split_at(KEY_ID_LEN);
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let key = match self.key(key_id) {
            Some(key) => key,
            // Another process may have rotated: read the keys again once, then decide.
            None if self.may_reload_for(key_id) => match self.reload().ok().and_then(|_| self.key(key_id)) {
                Some(key) => key,
                None => {
                    self.remember_missing(key_id);
                    return Err(CryptoError::UnknownKey(hex::encode(key_id)));
                }
            },
            None => return Err(CryptoError::UnknownKey(hex::encode(key_id))),
        };
        // `decrypt` (not `decrypt_in_place_detached`): nothing of the buffer is visible when the
        // tag check fails (RUSTSEC-2023-0096).
        key.cipher
            .decrypt(Nonce::from_slice(nonce), Payload { msg: ciphertext, aad: &ctx.aad() })
            .map_err(|_| CryptoError::Tampered)
    }

    fn key(&self, id: &[u8]) -> Option<Arc<SealingKey>> {
        self.ring().iter().find(|k| k.id == id).cloned()
    }

    fn may_reload_for(&self, key_id: &[u8]) -> bool {
        self.loader.is_some()
            && self.missing.lock().map_or(true, |missing| {
                missing
                    .iter()
                    .find(|(id, _)| id.as_slice() == key_id)
                    .is_none_or(|(_, at)| at.elapsed() >= RELOAD_AT_MOST_EVERY)
            })
    }

    fn remember_missing(&self, key_id: &[u8]) {
        let Ok(id) = <[u8; KEY_ID_LEN]>::try_from(key_id) else { return };
        if let Ok(mut missing) = self.missing.lock() {
            if missing.len() >= MISSING_REMEMBERED {
                missing.clear();
            }
            missing.insert(id, std::time::Instant::now());
        }
    }

    /// A stable secret derived from the active key at start-up for `label` (HKDF-SHA256,
    /// RFC 5869), hex: the same in every process sharing the key, so it needs no storage of its
    /// own. A rotation changes it at the next restart (recognised-device cookies are then
    /// forgotten once).
    pub fn derive_secret(&self, label: &str) -> SecretString {
        let mut out = [0u8; 32];
        // 32 bytes is far below HKDF's 255×32 output limit, so expand cannot fail.
        let _ = self.derive.expand(label.as_bytes(), &mut out);
        SecretString::from(hex::encode(out))
    }

    /// Key id a sealed blob was made with, for `admin` reports and rewrap decisions.
    pub fn key_id_of(sealed: &[u8]) -> Option<String> {
        sealed.get(1..1 + KEY_ID_LEN).map(hex::encode)
    }
}

/// `bytes` random bytes, URL-safe base64 without padding. 32 bytes = 256 bits.
pub fn random_token(bytes: usize) -> String {
    let mut raw = vec![0u8; bytes];
    OsRng.fill_bytes(&mut raw);
    URL_SAFE_NO_PAD.encode(raw)
}

/// SHA-256, hex. Used to store one-time values (state, session ids, codes) so a database
/// reader cannot replay them.
pub fn sha256_hex(value: &str) -> String {
    hex::encode(Sha256::digest(value.as_bytes()))
}

/// Constant-time equality for secrets compared in memory.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// A one-time secret (a service's client secret, …) generated together with the hash stored
/// in its place (after rust-lang/crates.io `SecureToken`): the plaintext is shown once and
/// dropped, only [`SecretHash`] reaches the database, and the two are different types so one
/// cannot be passed for the other. `Debug` prints neither.
pub struct OneTimeSecret {
    plaintext: SecretString,
    hash: SecretHash,
}

impl OneTimeSecret {
    /// `prefix` followed by `bytes` random bytes, URL-safe base64 ([`random_token`]).
    pub fn generate(prefix: &str, bytes: usize) -> Self {
        let plaintext = format!("{prefix}{}", random_token(bytes));
        let hash = SecretHash::of(&plaintext);
        Self { plaintext: SecretString::from(plaintext), hash }
    }

    /// The plaintext, to show its owner once.
    pub fn expose_plaintext(&self) -> &str {
        self.plaintext.expose_secret()
    }

    /// What to store.
    pub fn hash(&self) -> &SecretHash {
        &self.hash
    }
}

impl std::fmt::Debug for OneTimeSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OneTimeSecret([redacted])")
    }
}

/// [`sha256_hex`] of a secret: what the database holds instead of it. A fast hash suffices
/// because the secrets are 256 random bits. Compared only in constant time.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretHash(String);

impl SecretHash {
    /// The hash of a presented or generated plaintext.
    pub fn of(plaintext: &str) -> Self {
        Self(sha256_hex(plaintext))
    }

    /// A hash read from the database: 64 lowercase hex digits, or `None`.
    pub fn from_stored(hex: String) -> Option<Self> {
        let ok = hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then_some(Self(hex))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is the secret this is the hash of, compared in constant time.
    pub fn verify(&self, presented: &str) -> bool {
        constant_time_eq(sha256_hex(presented).as_bytes(), self.0.as_bytes())
    }
}

impl std::fmt::Debug for SecretHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretHash([redacted])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(row: &str) -> SealContext<'_> {
        SealContext { table: "grants", column: "access_token", row_id: row, owner: "user-1" }
    }

    fn sealer() -> Sealer {
        Sealer::new(&[7u8; 32], &[]).unwrap()
    }

    #[test]
    fn sealed_value_opens_in_its_own_row() {
        let s = sealer();
        let blob = s.seal(b"gho_secret", ctx("g1"));
        assert_eq!(s.open(&blob, ctx("g1")).unwrap(), b"gho_secret");
        assert!(!blob.windows(10).any(|w| w == b"gho_secret"), "plaintext must not appear");
    }

    #[test]
    fn sealed_value_moved_to_another_row_does_not_open() {
        let s = sealer();
        let blob = s.seal(b"gho_secret", ctx("g1"));
        assert!(matches!(s.open(&blob, ctx("g2")), Err(CryptoError::Tampered)));
    }

    #[test]
    fn tampered_ciphertext_is_rejected() {
        let s = sealer();
        let mut blob = s.seal(b"gho_secret", ctx("g1"));
        let last = blob.len() - 1;
        blob[last] ^= 1;
        assert!(matches!(s.open(&blob, ctx("g1")), Err(CryptoError::Tampered)));
        assert!(matches!(s.open(&blob[..5], ctx("g1")), Err(CryptoError::Truncated)));
    }

    #[test]
    fn retired_key_still_opens_after_rotation_but_new_values_use_the_active_key() {
        let old = sealer();
        let blob = old.seal(b"v", ctx("g1"));
        let rotated = Sealer::new(&[9u8; 32], &[&[7u8; 32]]).unwrap();
        assert_eq!(rotated.open(&blob, ctx("g1")).unwrap(), b"v");
        let fresh = rotated.seal(b"v", ctx("g1"));
        assert_eq!(Sealer::key_id_of(&fresh).unwrap(), rotated.active_key_id());
        assert!(matches!(old.open(&fresh, ctx("g1")), Err(CryptoError::UnknownKey(_))));
    }

    #[test]
    fn derived_secrets_are_stable_per_key_and_label() {
        let a = sealer().derive_secret("x");
        assert_eq!(a.expose_secret(), sealer().derive_secret("x").expose_secret());
        assert_ne!(a.expose_secret(), sealer().derive_secret("y").expose_secret());
        let other = Sealer::new(&[8u8; 32], &[]).unwrap();
        assert_ne!(a.expose_secret(), other.derive_secret("x").expose_secret());
    }

    #[test]
    fn keys_of_the_wrong_length_are_refused() {
        assert!(matches!(Sealer::new(&[1u8; 16], &[]), Err(CryptoError::BadKeyLength(16))));
        let short = SecretString::from("c2hvcnQ=".to_string());
        assert!(matches!(Sealer::parse_key(&short), Err(CryptoError::BadKeyLength(5))));
        let generated = Sealer::generate_key();
        assert_eq!(Sealer::parse_key(&generated).unwrap().expose_secret().len(), 32);
    }

    #[test]
    fn a_one_time_secret_carries_its_hash_and_debug_shows_neither() {
        let secret = OneTimeSecret::generate("obs_", 32);
        let plaintext = secret.expose_plaintext().to_owned();
        assert!(plaintext.starts_with("obs_"));
        assert_eq!(plaintext.len(), 4 + 43, "32 bytes of URL-safe base64 without padding");
        assert_eq!(secret.hash().as_str(), sha256_hex(&plaintext));
        assert!(secret.hash().verify(&plaintext));
        assert!(!secret.hash().verify(&format!("{plaintext}x")));
        assert_ne!(plaintext, OneTimeSecret::generate("obs_", 32).expose_plaintext());
        let shown = format!("{secret:?} {:?}", secret.hash());
        assert!(!shown.contains(&plaintext) && !shown.contains(secret.hash().as_str()), "{shown}");
        assert!(shown.contains("[redacted]"));
    }

    #[test]
    fn stored_hashes_must_look_like_sha256_hex() {
        let hash = sha256_hex("x");
        assert_eq!(SecretHash::from_stored(hash.clone()).unwrap().as_str(), hash);
        for bad in ["", "abc", &hash.to_uppercase(), &format!("{hash}0"), &"g".repeat(64)] {
            assert!(SecretHash::from_stored(bad.to_owned()).is_none(), "{bad:?}");
        }
    }
}
