//! Which protocol revision a server behind the broker speaks, and how the broker's connection
//! to it opens ("2025-11-25 session or stateless 2026-07-28, whichever the
//! server speaks").
//!
//! MCP 2026-07-28 has no `initialize`: a client asks `server/discover` which revisions a server
//! speaks and then sends every request self-contained (its `_meta` names the revision, the
//! client and its capabilities). A server of an older revision cannot answer that request — it
//! knows no such method, or no request outside a session — and the client falls back to the
//! 2025-11-25 `initialize`. The broker asks once per registered server, on the first connection
//! any user opens, and remembers the answer on this instance for as long as the server stays
//! registered (removing and adding it again asks again); later connections open the remembered
//! way at once.
//!
//! A connection to a stateless server is rmcp's client with its user's credential cell and
//! nothing at the server: no `initialize`, no `Mcp-Session-Id`, no standalone GET stream; each
//! call is one self-contained POST carrying the user's credential as it is then. It is still one
//! per (user, server) ([`super::pool`]): rmcp's client keeps caches of its own (the tool list,
//! the discovery result), and nothing of one user's may serve another's calls.

use std::sync::RwLock;

use rmcp::model::ProtocolVersion;
use rmcp::service::ClientLifecycleMode;

/// How a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revision {
    /// 2025-11-25 and older: `initialize`, a session, requests of the server's own mid-call.
    Sessions,
    /// 2026-07-28: `server/discover`, then self-contained requests; questions come back as an
    /// `InputRequiredResult` ([`crate::mcp::gateway::forward::rounds`]).
    Stateless,
}

impl Revision {
    /// The rmcp lifecycle that opens a connection in this revision.
    pub fn lifecycle(self) -> ClientLifecycleMode {
        match self {
            Self::Sessions => ClientLifecycleMode::Initialize,
            Self::Stateless => {
                ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] }
            }
        }
    }
}

/// What this instance knows of a server's revision (nothing until a connection opened).
#[derive(Debug, Default)]
pub struct Remembered(RwLock<Option<Revision>>);

impl Remembered {
    pub fn get(&self) -> Option<Revision> {
        *self.0.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set(&self, revision: Revision) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Some(revision);
    }
}
