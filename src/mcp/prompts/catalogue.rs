//! The prompt catalogue itself ([`PromptCatalogue`]): the three sources merged, listed with
//! pagination, found by name for `prompts/get` and `completion/complete`, and the operator's
//! prompts kept current by [`super::watch`].

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{ErrorData, GetPromptResponse, JsonObject, ListPromptsResult, Prompt, PromptArgument};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::files::OperatorPrompt;
use super::watch::{self, Shared};
use super::{args, builtin, load};
use crate::config::Config;
use crate::events::Events;
use crate::mcp::extension::{Extension, ExtensionContext, Extensions};
use crate::mcp::pagination::page;
use crate::state::AppState;

const DEFAULT_PAGE_SIZE: usize = 50;

pub struct PromptCatalogue {
    /// `None` for [`PromptCatalogue::empty`]: no directory, nothing to watch.
    dir: Option<PathBuf>,
    page_size: usize,
    extensions: Extensions,
    shared: Arc<Shared>,
    /// Extension prompt names already warned about (listing happens often; warn once).
    warned: Mutex<HashSet<String>>,
    watching: AtomicBool,
}

/// Where a prompt comes from, for `prompts/get` and `completion/complete`.
pub enum Origin {
    Builtin,
    Operator(Arc<OperatorPrompt>),
    Extension(Arc<dyn Extension>),
}

pub struct Found {
    pub origin: Origin,
    pub arguments: Vec<PromptArgument>,
}

impl std::fmt::Debug for PromptCatalogue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptCatalogue")
            .field("dir", &self.dir)
            .field("operator_prompts", &self.shared.snapshot().len())
            .finish_non_exhaustive()
    }
}

impl PromptCatalogue {
    /// Built-in prompts only (for states built outside [`crate::app::AppBuilder`]).
    pub fn empty() -> Self {
        Self::build(None, DEFAULT_PAGE_SIZE, Extensions::default(), Events::new())
    }

    /// Loads the operator directory now (start-up, so blocking is fine); call
    /// [`PromptCatalogue::start_watching`] to follow changes.
    pub fn new(config: &Config, extensions: Extensions, events: Events) -> Self {
        let catalogue = Self::build(Some(config.prompts_dir.clone()), config.page_size, extensions, events);
        catalogue.shared.replace(load::load_dir(&config.prompts_dir, &builtin::NAMES));
        catalogue
    }

    fn build(dir: Option<PathBuf>, page_size: usize, extensions: Extensions, events: Events) -> Self {
        Self {
            dir,
            page_size,
            extensions,
            shared: Arc::new(Shared::new(events)),
            warned: Mutex::default(),
            watching: AtomicBool::new(false),
        }
    }

    /// Follows the operator directory until `shutdown` fires (once; later calls do nothing).
    pub fn start_watching(&self, shutdown: CancellationToken) {
        let Some(dir) = self.dir.clone() else { return };
        if self.watching.swap(true, Ordering::SeqCst) {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(watch::run(self.shared.clone(), dir, watch::Timing::default(), shutdown));
            }
            Err(_) => tracing::warn!("no async runtime: prompt files are not watched"),
        }
    }

    // MCP server/prompts §Listing Prompts, server/utilities/pagination.
    pub fn list(&self, cursor: Option<&str>) -> Result<ListPromptsResult, ErrorData> {
        self.list_with(|_| Vec::new(), cursor)
    }

    /// [`Self::list`] followed by what `more` lists (the servers behind the broker), given a
    /// test for the names already taken; one list, paginated as one.
    pub fn list_with(
        &self,
        more: impl FnOnce(&dyn Fn(&str) -> bool) -> Vec<Prompt>,
        cursor: Option<&str>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let mut all: Vec<Prompt> = self.entries().into_iter().map(|(prompt, _)| prompt).collect();
        let taken: HashSet<String> = all.iter().map(|p| p.name.clone()).collect();
        all.extend(more(&|name| taken.contains(name)));
        let (items, next) = page(&all, cursor, self.page_size, "prompts")?;
        let mut result = ListPromptsResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    // MCP server/prompts §Getting a Prompt: unknown name, missing or unknown argument → -32602.
    // An extension's prompt may answer a 2026-07-28 request with an `InputRequiredResult`.
    pub async fn get(
        &self,
        state: &AppState,
        name: &str,
        arguments: Option<JsonObject>,
        ctx: ExtensionContext,
    ) -> Result<GetPromptResponse, ErrorData> {
        let found = self.find(name).ok_or_else(|| unknown_prompt(name))?;
        let values = args::check(name, &found.arguments, arguments)?;
        match found.origin {
            Origin::Builtin => builtin::render(state, name, &values, &ctx.user).await.map(Into::into),
            Origin::Operator(prompt) => Ok(prompt.render(&values).into()),
            Origin::Extension(extension) => {
                extension.get_prompt(name, values, ctx).await.unwrap_or_else(|| Err(unknown_prompt(name)))
            }
        }
    }

    /// The prompt called `name` (after merging) and its declared arguments.
    pub fn find(&self, name: &str) -> Option<Found> {
        self.entries()
            .into_iter()
            .find(|(prompt, _)| prompt.name == name)
            .map(|(prompt, origin)| Found { origin, arguments: prompt.arguments.unwrap_or_default() })
    }

    /// Every prompt in listing order: built-in, operator files, extensions; first name wins.
    fn entries(&self) -> Vec<(Prompt, Origin)> {
        let mut entries: Vec<(Prompt, Origin)> = builtin::prompts().into_iter().map(|p| (p, Origin::Builtin)).collect();
        // Operator files never shadow built-ins: the loader already skipped those.
        entries.extend(self.shared.snapshot().iter().map(|p| (p.prompt.clone(), Origin::Operator(p.clone()))));
        let mut taken: HashSet<String> = entries.iter().map(|(p, _)| p.name.clone()).collect();
        for extension in self.extensions.iter() {
            for prompt in extension.prompts() {
                if taken.insert(prompt.name.clone()) {
                    entries.push((prompt, Origin::Extension(extension.clone())));
                } else {
                    self.warn_duplicate(&prompt.name);
                }
            }
        }
        entries
    }

    fn warn_duplicate(&self, name: &str) {
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        if warned.insert(name.to_owned()) {
            tracing::warn!(name, "an extension prompt has the name of an earlier prompt and is skipped");
        }
    }
}

pub fn unknown_prompt(name: &str) -> ErrorData {
    let shown: String = name.chars().take(128).collect();
    ErrorData::invalid_params(format!("unknown prompt {}", args::shown(name)), Some(json!({ "name": shown })))
}

#[cfg(test)]
#[path = "catalogue_tests.rs"]
mod tests;
