//! `completion/complete` (MCP 2025-11-25 server/utilities/completion).
//!
//! What we can complete, we complete from what the broker knows:
//! - an argument named `provider` (of our prompts, or of `broker://connections/{provider}`):
//!   the configured provider ids;
//! - `account`: the caller's own connected account labels, for `context.arguments.provider`
//!   when given — never another user's (the spec: suggestions must not leak information);
//! - `scopes` of `connect_provider`: the provider's scopes, completing the last one typed.
//!
//! The spec says servers MUST rate-limit completions: at most [`PER_WINDOW`] per user in any
//! [`WINDOW_SECONDS`], counted in the database ([`take_budget`]) so the budget holds across the
//! user's sessions and across instances: opening more sessions, or reaching another
//! instance, buys no more. Typing produces a burst well inside it; a loop produces a flood.
//!
//! Extension prompts and templates ask the extensions first. A prompt or template that does not
//! exist, or an argument it does not declare, is -32602. At most 100 values, with `total` and
//! `hasMore`.

use rmcp::model::{CompleteRequestParams, CompleteResult, CompletionInfo, ErrorData, Reference};

use crate::mcp::extension::ExtensionContext;
use crate::mcp::prompts::args::shown;
use crate::mcp::prompts::builtin::{CONNECT_PROVIDER, known_scopes};
use crate::mcp::prompts::{Origin, unknown_prompt};
use crate::mcp::resources::uri::CONNECTION_TEMPLATE;
use crate::mcp::state::McpState;

/// Completions one user may ask for in any [`WINDOW_SECONDS`].
pub const PER_WINDOW: i64 = 100;
/// The completion budget's sliding window.
pub const WINDOW_SECONDS: i64 = 10;

/// Takes one completion from the user's budget (shared by every session and instance), or
/// refuses with "slow down".
pub async fn take_budget(state: &McpState, user_id: &str) -> Result<(), ErrorData> {
    let now = state.app.core.now();
    let bucket = format!("complete\n{user_id}");
    let taken = state
        .app
        .core
        .store
        .throttle()
        .budget_take(&bucket, now, now - WINDOW_SECONDS, PER_WINDOW)
        .await
        .map_err(|error| crate::mcp::failure::internal(&error, "counting a completion failed"))?;
    if taken { Ok(()) } else { Err(ErrorData::invalid_request("too many completion requests; slow down", None)) }
}

pub async fn complete(
    state: &McpState,
    request: CompleteRequestParams,
    ctx: ExtensionContext,
) -> Result<CompleteResult, ErrorData> {
    let info = match &request.r#ref {
        Reference::Prompt(prompt) => complete_prompt(state, &prompt.name, &request, ctx).await?,
        Reference::Resource(resource) => complete_resource(state, &resource.uri, &request, ctx).await?,
        other => {
            return Err(ErrorData::invalid_params(
                format!("unsupported completion reference {}", other.reference_type()),
                None,
            ));
        }
    };
    Ok(CompleteResult::new(info))
}

async fn complete_prompt(
    state: &McpState,
    name: &str,
    request: &CompleteRequestParams,
    ctx: ExtensionContext,
) -> Result<CompletionInfo, ErrorData> {
    let found = state.prompts.find(name).ok_or_else(|| unknown_prompt(name))?;
    match &found.origin {
        Origin::Extension(extension) => {
            if let Some(answer) = extension.complete(request, ctx.clone()).await {
                return answer.map(capped);
            }
        }
        Origin::Builtin | Origin::Operator(_) => {
            if !found.arguments.iter().any(|a| a.name == request.argument.name) {
                return Err(ErrorData::invalid_params(
                    format!("prompt {} has no argument {}", shown(name), shown(&request.argument.name)),
                    None,
                ));
            }
        }
    }
    known_values(state, Some(name), request, &ctx).await
}

async fn complete_resource(
    state: &McpState,
    uri: &str,
    request: &CompleteRequestParams,
    ctx: ExtensionContext,
) -> Result<CompletionInfo, ErrorData> {
    if uri == CONNECTION_TEMPLATE {
        if request.argument.name != "provider" {
            return Err(ErrorData::invalid_params(
                format!("{CONNECTION_TEMPLATE} has no argument {}", shown(&request.argument.name)),
                None,
            ));
        }
        return known_values(state, None, request, &ctx).await;
    }
    for extension in state.extensions.iter() {
        if let Some(answer) = extension.complete(request, ctx.clone()).await {
            return answer.map(capped);
        }
    }
    let known = state.extensions.iter().any(|e| e.resource_templates().iter().any(|t| t.uri_template == uri));
    if known {
        Ok(capped(CompletionInfo::default()))
    } else {
        Err(ErrorData::invalid_params(format!("unknown resource template {}", shown(uri)), None))
    }
}

/// Values the broker itself knows for an argument name.
async fn known_values(
    state: &McpState,
    prompt: Option<&str>,
    request: &CompleteRequestParams,
    ctx: &ExtensionContext,
) -> Result<CompletionInfo, ErrorData> {
    let typed = request.argument.value.as_str();
    let context_provider =
        request.context.as_ref().and_then(|c| c.get_argument("provider")).map(|p| p.trim()).filter(|p| !p.is_empty());
    let candidates = match request.argument.name.as_str() {
        "provider" => state.app.core.providers.ids(),
        "account" => accounts(state, ctx, context_provider).await?,
        "scopes" if prompt == Some(CONNECT_PROVIDER) => {
            let scopes = context_provider
                .and_then(|p| state.app.core.providers.find(p))
                .map(|p| known_scopes(&p))
                .unwrap_or_default();
            return Ok(scope_values(&scopes, typed));
        }
        _ => Vec::new(),
    };
    Ok(matching(candidates, typed))
}

/// The caller's own account labels (for one provider when it is known).
async fn accounts(state: &McpState, ctx: &ExtensionContext, provider: Option<&str>) -> Result<Vec<String>, ErrorData> {
    let grants = state
        .app
        .core
        .store
        .grants()
        .for_user(&ctx.user.user_id)
        .await
        .map_err(|error| crate::mcp::failure::internal(&error, "reading connections for completion failed"))?;
    Ok(grants
        .into_iter()
        .filter(|g| provider.is_none_or(|p| g.provider == p))
        .filter_map(|g| g.account_label)
        .collect())
}

/// Candidates starting with what was typed (case-insensitively), sorted, at most 100.
fn matching(candidates: Vec<String>, typed: &str) -> CompletionInfo {
    let typed = typed.to_lowercase();
    let mut values: Vec<String> = candidates.into_iter().filter(|c| c.to_lowercase().starts_with(&typed)).collect();
    values.sort();
    values.dedup();
    capped(info_with(values))
}

/// `typed` is a list of scopes; completes its last word with scopes not yet in it.
fn scope_values(scopes: &[String], typed: &str) -> CompletionInfo {
    let split = typed.rfind(|c: char| c.is_whitespace() || c == ',').map_or(0, |i| i + 1);
    let (done, last) = typed.split_at(split);
    let chosen: Vec<&str> = done.split(|c: char| c.is_whitespace() || c == ',').collect();
    let candidates: Vec<String> = scopes
        .iter()
        .filter(|s| s.starts_with(last) && !chosen.contains(&s.as_str()))
        .map(|s| format!("{done}{s}"))
        .collect();
    capped(info_with(candidates))
}

fn info_with(values: Vec<String>) -> CompletionInfo {
    let mut info = CompletionInfo::default();
    info.values = values;
    info
}

/// MCP: at most 100 values; `total` counts them all and `hasMore` says some were cut.
fn capped(mut info: CompletionInfo) -> CompletionInfo {
    let total = info.values.len().max(info.total.map_or(0, |t| t as usize));
    let cut = info.values.len() > CompletionInfo::MAX_VALUES;
    info.values.truncate(CompletionInfo::MAX_VALUES);
    info.total = Some(u32::try_from(total).unwrap_or(u32::MAX));
    info.has_more = Some(cut || info.has_more.unwrap_or(false));
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_are_prefixes_case_insensitively_sorted_and_unique() {
        let info = matching(vec!["github".into(), "demo".into(), "gitlab".into(), "github".into()], "Git");
        assert_eq!(info.values, ["github", "gitlab"]);
        assert_eq!((info.total, info.has_more), (Some(2), Some(false)));
        assert_eq!(matching(vec!["demo".into()], "").values, ["demo"]);
    }

    #[test]
    fn more_than_a_hundred_values_are_cut_with_total_and_has_more() {
        let many: Vec<String> = (0..150).map(|i| format!("p{i:03}")).collect();
        let info = matching(many, "p");
        assert_eq!(info.values.len(), 100);
        assert_eq!((info.total, info.has_more), (Some(150), Some(true)));
    }

    #[test]
    fn scopes_complete_the_last_word_and_skip_chosen_ones() {
        let scopes: Vec<String> = ["profile", "notes:read", "notes:write"].map(String::from).to_vec();
        assert_eq!(scope_values(&scopes, "no").values, ["notes:read", "notes:write"]);
        assert_eq!(scope_values(&scopes, "notes:read ").values, ["notes:read profile", "notes:read notes:write"]);
        assert_eq!(scope_values(&scopes, "profile,notes:w").values, ["profile,notes:write"]);
    }
}
