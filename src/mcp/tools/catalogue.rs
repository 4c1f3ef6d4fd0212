//! The broker's tools as the client is shown them (MCP 2025-11-25 server/tools): names, input
//! and output schemas, annotations, and the labels metrics and spans may carry. Arguments that
//! break a tool's schema never reach a tool: they are refused with `-32602` naming the field
//! ([`super::schema`]). What a schema cannot say (a provider not connected, an account that does
//! not exist) is a tool execution error (`isError`, SEP-1303) so the model can correct itself.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde::Deserialize;
use serde_json::{Value, json};

pub const LIST_CONNECTIONS: &str = "list_connections";
pub const CONNECT_ACCOUNT: &str = "connect_account";
pub const DISCONNECT_ACCOUNT: &str = "disconnect_account";
pub const PROVIDER_REQUEST: &str = "provider_request";

/// The broker's tools, the closed set metrics and log spans name.
const BUILTIN: [&str; 4] = [LIST_CONNECTIONS, CONNECT_ACCOUNT, DISCONNECT_ACCOUNT, PROVIDER_REQUEST];

/// A tool name as metrics and spans may carry it: one of the broker's own tools, else `other`
/// (never a name a client made up, which could be anything).
pub fn label(name: &str) -> &'static str {
    BUILTIN.iter().find(|tool| **tool == name).copied().unwrap_or("other")
}

fn object(value: Value) -> Arc<JsonObject> {
    Arc::new(value.as_object().cloned().unwrap_or_default())
}

fn annotations(title: &str, read_only: bool, destructive: bool, idempotent: bool, open_world: bool) -> ToolAnnotations {
    let mut a = ToolAnnotations::with_title(title);
    a.read_only_hint = Some(read_only);
    a.destructive_hint = Some(destructive);
    a.idempotent_hint = Some(idempotent);
    a.open_world_hint = Some(open_world);
    a
}

/// The tool catalogue, in a stable order.
pub fn tools(provider_ids: &[String]) -> Vec<Tool> {
    let provider_schema = json!({"type": "string", "description": "Provider id", "enum": provider_ids});
    let account_schema = |what: &str| {
        json!({"type": "string", "maxLength": 128, "description": format!(
            "Which of your accounts at the provider {what} (its name as list_connections shows it). \
             Needed only when you have several there; left out, you are asked to choose."
        )})
    };
    vec![
        Tool::new(
            LIST_CONNECTIONS,
            "List the third-party providers this broker can connect to and, for each, whether you are connected, with which accounts and scopes (one entry per account), and whether this client may use each connection yet.",
            object(json!({"type": "object", "properties": {}, "additionalProperties": false})),
        )
        .with_title("List connections")
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": {"connections": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "provider": {"type": "string"},
                    "display_name": {"type": "string"},
                    "connected": {"type": "boolean"},
                    "status": {"type": "string", "enum": ["connected", "needs_reconsent", "not_connected"]},
                    "account": {"type": ["string", "null"]},
                    "scopes": {"type": "array", "items": {"type": "string"}},
                    "expires_at": {"type": ["integer", "null"]},
                    "allowed_for_this_client": {"type": "boolean", "description": "Whether you allowed this client to use this connection with all its scopes; if not, using it asks you first."},
                    "state": {"type": "string", "enum": crate::broker::connection_status::Status::CODES, "description": "Where the connection stands for this client: ready, needs_reconsent or revoked (connect again), refresh_failing (kept; retried at next_refresh_at), consent_required (using it asks you first), not_connected. The token API's GET /v1/connections says the same."},
                    "last_refresh_error": {"type": ["string", "null"], "description": "Why the last refresh failed: rate_limited, server_error, timeout, unreachable, refused, invalid_grant, no_refresh_token or unreadable."},
                    "next_refresh_at": {"type": ["integer", "null"], "description": "While a failing refresh is held back: when it is tried again (Unix seconds)."}
                },
                "required": ["provider", "display_name", "connected", "status", "scopes"]
            }}},
            "required": ["connections"]
        })))
        .with_annotations(annotations("List connections", true, false, true, false)),
        Tool::new(
            CONNECT_ACCOUNT,
            "Connect your account at a provider so tools can act there on your behalf. You approve in your browser on the broker's own page; your credentials never pass through this client.",
            object(json!({
                "type": "object",
                "properties": {
                    "provider": provider_schema,
                    "scopes": {"type": "array", "items": {"type": "string"}, "description": "Scopes to request; when omitted, you may be asked to choose (else the provider's defaults)"},
                    "account": account_schema("to connect or reconnect; a new name adds another account")
                },
                "required": ["provider"],
                "additionalProperties": false
            })),
        )
        .with_title("Connect an account")
        .with_annotations(annotations("Connect an account", false, false, true, true)),
        Tool::new(
            DISCONNECT_ACCOUNT,
            "Disconnect your account at a provider: the broker revokes its tokens there and forgets them. You may be asked to confirm.",
            object(json!({
                "type": "object",
                "properties": {"provider": provider_schema, "account": account_schema("to disconnect")},
                "required": ["provider"],
                "additionalProperties": false
            })),
        )
        .with_title("Disconnect an account")
        .with_annotations(annotations("Disconnect an account", false, true, true, true)),
        Tool::new(
            PROVIDER_REQUEST,
            "Call a provider's API as you, with your stored token (never shown). `path` is relative to the provider's API base URL. Returns the HTTP status, selected headers and the body.",
            object(json!({
                "type": "object",
                "properties": {
                    "provider": provider_schema,
                    "method": {"type": "string", "enum": ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]},
                    "path": {"type": "string", "description": "Path under the provider's API base, e.g. /user"},
                    "query": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}},
                    "body": {"description": "JSON body for POST/PUT/PATCH/DELETE"},
                    "account": account_schema("to act as")
                },
                "required": ["provider", "method", "path"],
                "additionalProperties": false
            })),
        )
        .with_title("Call a provider API")
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": {
                "status": {"type": "integer"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "body": {},
                "truncated": {"type": "boolean"}
            },
            "required": ["status", "headers", "body", "truncated"]
        })))
        .with_annotations(annotations("Call a provider API", false, true, false, true)),
    ]
}

/// The answer to a tool naming a provider we do not serve: the name (cut short), and ours.
pub(crate) fn unknown_provider(known: &[String], asked: &str) -> String {
    let shown: String = asked.chars().take(64).collect();
    format!("Unknown provider {shown:?}. Known providers: {}.", known.join(", "))
}

/// Parses a tool's arguments; the error text names what is wrong.
pub fn parse_args<T: for<'de> Deserialize<'de>>(arguments: Option<JsonObject>) -> Result<T, String> {
    serde_json::from_value(Value::Object(arguments.unwrap_or_default())).map_err(|e| format!("invalid arguments: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_label_is_one_of_the_brokers_tools_never_what_a_client_sent() {
        assert_eq!(label(PROVIDER_REQUEST), "provider_request");
        assert_eq!(label("user-4711-secret"), "other");
    }
}
