//! What is signalled: an authorization reached a final state ([`AuthorizationFinished`]), or
//! something else a face relays ([`Signal`]); and [`Wire`], the JSON form both take between
//! instances (ids only, never a secret).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorizationFinished {
    pub authorization_id: String,
    pub user_id: String,
    pub provider: String,
    /// `completed`, `declined` or `failed`.
    pub status: String,
}

/// Changes MCP sessions relay as notifications.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Signal {
    /// The prompt catalogue changed (`notifications/prompts/list_changed` to every session).
    /// Prompt files are read by each process from its own disk, and each process's watcher
    /// sends this for its own catalogue, so it stays in the process (see
    /// [`Signal::crosses_instances`]).
    PromptsChanged,
    /// The tools of the servers behind the broker changed (`notifications/tools/list_changed`
    /// to every session). Each process keeps its own lists and sends this for its own, so it
    /// stays in the process, as [`Signal::PromptsChanged`] does.
    ToolsChanged,
    /// The resources or templates of the servers behind the broker changed
    /// (`notifications/resources/list_changed` to every session); kept in the process, as
    /// [`Signal::ToolsChanged`] is.
    ResourceListChanged,
    /// Resources of one user changed (`notifications/resources/updated` to that user's
    /// sessions subscribed to one of these URIs).
    ResourcesChanged { user_id: String, uris: Vec<String> },
    /// A server behind the broker says one of its resources changed, over one user's connection
    /// of this process (`notifications/resources/updated` to that user's sessions subscribed to
    /// these gateway URIs). It stays in the process: the sessions that subscribed through this
    /// connection are here, and another instance hears its own connections.
    ServerResourcesUpdated { user_id: String, uris: Vec<String> },
    /// An instance read one of a server's lists, found it changed and stored it
    /// (`store::gateway::lists`): every instance reads it back, and its sessions hear the
    /// matching `list_changed` if their list changed too. Ids only; the list is in the table.
    GatewayListsStored { server_id: String },
    /// The resources a server that acts as the user lists to `user_id` (to every user if
    /// `None`) may have changed (`notifications/resources/list_changed` to their sessions and
    /// listens, on every instance). Each user's resources of such a server are read when their
    /// client lists (`mcp::gateway::forward::own_resources`). `None`: the server said so over one user's
    /// connection, and may have changed more users' than that one, so everyone is told and
    /// each lists their own again. `Some`: that user's lists left the server out for a while,
    /// which has ended.
    GatewayResourcesChanged { server_id: String, user_id: Option<String> },
}

impl Signal {
    /// Whether other instances on the same database must hear of it. Every signal does unless
    /// it concerns this process alone.
    pub fn crosses_instances(&self) -> bool {
        !matches!(
            self,
            Signal::PromptsChanged
                | Signal::ToolsChanged
                | Signal::ResourceListChanged
                | Signal::ServerResourcesUpdated { .. }
        )
    }
}

/// What travels between instances.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub(super) enum Wire {
    AuthorizationFinished(AuthorizationFinished),
    Signal(Signal),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_travel_as_json_with_ids_only() {
        let finished = Wire::AuthorizationFinished(AuthorizationFinished {
            authorization_id: "auth-1".into(),
            user_id: "user-1".into(),
            provider: "github".into(),
            status: "completed".into(),
        });
        let json = serde_json::to_string(&finished).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"authorization_finished","data":{"authorization_id":"auth-1","user_id":"user-1","provider":"github","status":"completed"}}"#
        );
        assert_eq!(serde_json::from_str::<Wire>(&json).unwrap(), finished);
        let changed = Wire::Signal(Signal::ResourcesChanged {
            user_id: "user-1".into(),
            uris: vec!["broker://connections".into()],
        });
        let json = serde_json::to_string(&changed).unwrap();
        assert_eq!(serde_json::from_str::<Wire>(&json).unwrap(), changed);
    }

    #[test]
    fn a_signal_this_version_does_not_know_is_refused_not_misread() {
        assert!(serde_json::from_str::<Wire>(r#"{"kind":"signal","data":{"SomethingNew":{"id":"x"}}}"#).is_err());
        assert!(serde_json::from_str::<Wire>(r#"{"kind":"brand_new","data":{}}"#).is_err());
    }

    #[test]
    fn the_prompt_catalogue_stays_in_its_process_and_resource_changes_travel() {
        assert!(!Signal::PromptsChanged.crosses_instances());
        assert!(Signal::ResourcesChanged { user_id: "u".into(), uris: vec![] }.crosses_instances());
        // A user's own resources of a server may be listed on any instance.
        assert!(Signal::GatewayResourcesChanged { server_id: "s".into(), user_id: None }.crosses_instances());
    }
}
