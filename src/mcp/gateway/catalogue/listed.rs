//! A server's prompts, resources and templates as the client sees them: prompts under the
//! server's prefix (each with its upstream name), resources and templates in the gateway's URI
//! scheme ([`super::uri`]). Filled and refreshed by [`super::lists`], kept in the server's
//! entry ([`super::registry`]).

use std::collections::HashMap;

use rmcp::model::{Prompt, Resource, ResourceTemplate};

use crate::domain::gateway::{ServerName, ToolPrefix};

/// A server's prompts as listed (prefixed), with the upstream name of each.
#[derive(Default)]
pub struct ServerPrompts {
    pub listed: Vec<Prompt>,
    upstream: HashMap<String, String>,
}

impl ServerPrompts {
    /// Lists `upstream` under `entry`'s prefix; a name that does not fit is left out.
    pub fn new(prefix: &ToolPrefix, server: &ServerName, upstream: Vec<Prompt>) -> Self {
        let mut prompts = Self::default();
        for mut prompt in upstream {
            let Some(name) = prefix.apply(&prompt.name) else {
                tracing::warn!(%server, "a prompt whose name does not fit the prefix is left out");
                continue;
            };
            if prompts.upstream.contains_key(&name) {
                continue;
            }
            prompts.upstream.insert(name.clone(), std::mem::replace(&mut prompt.name, name));
            prompts.listed.push(prompt);
        }
        prompts
    }

    /// The listed prompt called `name` and its upstream name.
    pub fn find(&self, name: &str) -> Option<(&Prompt, &str)> {
        let upstream = self.upstream.get(name)?;
        self.listed.iter().find(|p| p.name == name).map(|p| (p, upstream.as_str()))
    }
}

/// A server's resources and templates as listed (their URIs in the gateway's scheme).
///
/// `resources` is empty for a server that acts as the user: each user's are read over their
/// own connection when they list ([`crate::mcp::gateway::forward::own_resources`]), never kept here.
#[derive(Default, PartialEq)]
pub struct ServerResources {
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
    /// The server offers resources (its list was read, here or by another instance); false
    /// until then.
    pub offered: bool,
}

impl ServerResources {
    pub fn new(name: &ServerName, resources: Vec<Resource>, templates: Vec<ResourceTemplate>) -> Self {
        let resources = resources
            .into_iter()
            .map(|mut r| {
                r.uri = super::uri::wrap(name, &r.uri);
                r
            })
            .collect();
        let templates = templates
            .into_iter()
            .map(|mut t| {
                t.uri_template = super::uri::wrap(name, &t.uri_template);
                t
            })
            .collect();
        Self { resources, templates, offered: true }
    }
}
