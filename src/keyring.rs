//! Key rotation as a running server sees it: every `key_reload_interval` it reads its
//! encryption keys ([`crate::crypto::Sealer::reload`], from the files `admin keys rotate`
//! writes) and its signing keys ([`crate::identity::jwt::TokenKeys::reload`], from the
//! database `admin keys rotate-signing` writes) again. Values sealed under a key it has not
//! loaded yet make it read the keys at once too, so a server never has to be restarted for a
//! rotation, and a quiet one still stops sealing with the retired key within the interval.

use crate::state::AppState;

/// Spawns the reload loop; it stops at shutdown.
pub fn reload_periodically(state: &AppState) {
    let state = state.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(state.core.config.key_reload_interval);
        every.tick().await;
        loop {
            tokio::select! {
                _ = state.shutdown.cancelled() => return,
                _ = every.tick() => {}
            }
            reload_now(&state).await;
        }
    });
}

/// Reads both kinds of keys again, logging (never failing) what could not be read: the keys
/// already loaded keep working.
pub async fn reload_now(state: &AppState) {
    if let Err(error) = state.core.sealer.reload() {
        tracing::warn!(%error, "could not read the encryption keys again; keeping the loaded ones");
    }
    match state.identity.keys.reload(&state.core.store, &state.core.sealer, state.core.now()).await {
        Ok(true) => tracing::info!(kid = %state.identity.keys.active_kid(), "a new signing key signs from now on"),
        Ok(false) => {}
        Err(error) => tracing::warn!(%error, "could not read the signing keys again; keeping the loaded ones"),
    }
}
