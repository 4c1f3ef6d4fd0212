//! MCP resources (MCP 2025-11-25 server/resources) for the signed-in user.
//!
//! - [`uri`]: parsing and validating resource URIs; -32002; RFC 6570 level-1 matching.
//! - [`broker`]: `broker://connections`, `broker://connections/{provider}`, `broker://providers`.
//!
//! Extensions' resources and templates follow the broker's own; anything in the broker's
//! namespace (`broker://connections…`, `broker://providers`) is the broker's, so an extension
//! cannot shadow it. Every read is for `ctx.user` only. Updates reach subscribers through
//! [`crate::events::Events::connections_changed`], relayed per session by the server.

pub mod broker;
pub mod uri;

use rmcp::model::{ErrorData, ListResourceTemplatesResult, ListResourcesResult, ReadResourceResponse};

use self::uri::Route;
use crate::mcp::extension::ExtensionContext;
use crate::mcp::pagination::{page, page_of_changing};
use crate::mcp::state::McpState;

/// Every resource the user may read: the broker's, the extensions', those of the servers
/// behind the broker that serve every user alike, then `own` — the user's own on the servers
/// that act as the user (`crate::mcp::gateway::forward::own_resources`, read for this request).
// MCP 2025-11-25 server/resources §Listing Resources; utilities/pagination.
pub async fn list(
    state: &McpState,
    own: Vec<rmcp::model::Resource>,
    cursor: Option<&str>,
) -> Result<ListResourcesResult, ErrorData> {
    let mut all = broker::resources();
    for extension in state.extensions.iter() {
        for resource in extension.resources() {
            if extensions_may_list(&resource.uri) && !all.iter().any(|r| r.uri == resource.uri) {
                all.push(resource);
            }
        }
    }
    all.extend(state.gateway.resources());
    all.extend(own);
    // The user's own are read for each page: the list may have shrunk since the last one.
    let (items, next) = page_of_changing(&all, cursor, state.app.core.config.page_size, "resources")?;
    let mut result = ListResourcesResult::with_all_items(items);
    result.next_cursor = next;
    Ok(result)
}

// MCP 2025-11-25 server/resources §Resource Templates.
pub async fn templates(state: &McpState, cursor: Option<&str>) -> Result<ListResourceTemplatesResult, ErrorData> {
    let mut all = broker::templates(&state.app);
    for extension in state.extensions.iter() {
        for template in extension.resource_templates() {
            if extensions_may_list(&template.uri_template)
                && !all.iter().any(|t| t.uri_template == template.uri_template)
            {
                all.push(template);
            }
        }
    }
    all.extend(state.gateway.templates());
    let (items, next) = page(&all, cursor, state.app.core.config.page_size, "resource-templates")?;
    let mut result = ListResourceTemplatesResult::with_all_items(items);
    result.next_cursor = next;
    Ok(result)
}

// MCP 2025-11-25 server/resources §Reading Resources, §Error Handling (-32002). An extension's
// resource may answer a 2026-07-28 request with an `InputRequiredResult`.
pub async fn read(state: &McpState, ctx: ExtensionContext, uri: &str) -> Result<ReadResourceResponse, ErrorData> {
    match uri::route(uri) {
        Route::Broker(target) => broker::read(&state.app, &ctx.user.user_id, &target, uri).await.map(Into::into),
        Route::BrokerMalformed => Err(uri::not_found(uri)),
        Route::Other => {
            for extension in state.extensions.iter() {
                if let Some(result) = extension.read_resource(uri, ctx.clone()).await {
                    return result;
                }
            }
            Err(uri::not_found(uri))
        }
    }
}

/// Whether an extension may list `uri`: not in the broker's namespace, nor in the gateway's
/// (`gateway://…`, the servers behind the broker, [`crate::mcp::gateway::catalogue::uri`]).
fn extensions_may_list(uri: &str) -> bool {
    matches!(uri::route(uri), Route::Other) && !crate::mcp::gateway::catalogue::uri::is_gateway(uri)
}

/// Whether `uri` names a resource anyone may subscribe to (MCP 2025-11-25 server/resources
/// §Subscriptions): the broker's (each user reads only
/// their own) or one an extension lists or templates. For `subscriptions/listen` too, whose
/// filter is accepted before the request's user is looked at.
pub fn known(state: &McpState, uri: &str) -> bool {
    match uri::route(uri) {
        Route::Broker(target) => broker::exists(&state.app, &target),
        Route::BrokerMalformed => false,
        // A server behind the broker's resource: subscribed to on that server, by a session or
        // for a listen (`crate::mcp::gateway::forward::subscribe`), when the server keeps a session.
        Route::Other if crate::mcp::gateway::catalogue::uri::is_gateway(uri) => state.gateway.subscribable(uri),
        Route::Other => state.extensions.iter().any(|extension| {
            extension.resources().iter().any(|r| r.uri == uri)
                || extension.resource_templates().iter().any(|t| uri::matches_template(&t.uri_template, uri))
        }),
    }
}
