//! The fixtures the conformance suite's server scenarios call by exact name, as one broker
//! [`Extension`]. Shapes follow the scenario descriptions of `@modelcontextprotocol/conformance`
//! (0.1.16 and 0.2.0-alpha.12; `conformance list --server` names the scenarios):
//!
//! - [`tools`]: content types, logging, progress, errors, sampling, JSON Schema 2020-12;
//! - [`elicit`]: form elicitation (SEP-1034 defaults, SEP-1330 enums) and URL mode (SEP-1036);
//! - [`catalog`]: prompts, resources, a resource template and completions;
//! - [`mrtr`]: multi round-trip requests (2026-07-28, SEP-2322): tools and a prompt that answer
//!   with an `InputRequiredResult`, with a sealed `requestState` where they keep progress;
//! - [`stateless`]: the stateless scenario's diagnostic tools (2026-07-28, SEP-2575).

mod catalog;
mod elicit;
mod mrtr;
mod stateless;
mod tools;

use std::collections::BTreeMap;

use oauth_broker::mcp::extension::{Extension, ExtensionContext, ExtensionFuture};
use rmcp::model::{
    CallToolResponse, CompleteRequestParams, CompletionInfo, ErrorData, GetPromptResponse, JsonObject, Prompt,
    ReadResourceResponse, Resource, ResourceTemplate, Tool,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The suite's fixtures. One value serves every request: what it keeps (the key that seals
/// `requestState`, whether the dynamic prompt is listed) is the same for all of them.
pub struct Fixtures {
    mrtr: mrtr::Mrtr,
    stateless: stateless::Stateless,
}

impl Fixtures {
    pub fn new() -> Result<Self, rmcp::model::RequestStateError> {
        Ok(Self { mrtr: mrtr::Mrtr::new()?, stateless: stateless::Stateless::default() })
    }
}

impl Extension for Fixtures {
    fn tools(&self) -> Vec<Tool> {
        let tools = tools::list().into_iter().chain(elicit::list());
        tools.chain(mrtr::Mrtr::tools()).chain(stateless::Stateless::tools()).collect()
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Option<JsonObject>,
        ctx: ExtensionContext,
    ) -> ExtensionFuture<'a, CallToolResponse> {
        Box::pin(async move {
            let arguments = arguments.unwrap_or_default();
            if let Some(result) = tools::call(name, &arguments, &ctx).await {
                return Some(result.map(Into::into));
            }
            if let Some(result) = elicit::call(name, &arguments, &ctx).await {
                return Some(result.map(Into::into));
            }
            if let Some(result) = self.mrtr.call(name, &ctx).await {
                return Some(result);
            }
            self.stateless.call(name, &ctx).await
        })
    }

    fn prompts(&self) -> Vec<Prompt> {
        let prompts = catalog::prompts().into_iter().chain(mrtr::Mrtr::prompts());
        prompts.chain(self.stateless.prompts()).collect()
    }

    fn get_prompt<'a>(
        &'a self,
        name: &'a str,
        arguments: BTreeMap<String, String>,
        ctx: ExtensionContext,
    ) -> ExtensionFuture<'a, GetPromptResponse> {
        Box::pin(async move {
            match name {
                mrtr::PROMPT => Some(self.mrtr.get_prompt(&ctx)),
                stateless::DYNAMIC_PROMPT => Some(catalog::dynamic_prompt()),
                _ => catalog::get_prompt(name, &arguments).map(|result| result.map(Into::into)),
            }
        })
    }

    fn resources(&self) -> Vec<Resource> {
        catalog::resources()
    }

    fn resource_templates(&self) -> Vec<ResourceTemplate> {
        catalog::templates()
    }

    fn read_resource<'a>(&'a self, uri: &'a str, _ctx: ExtensionContext) -> ExtensionFuture<'a, ReadResourceResponse> {
        Box::pin(async move { catalog::read(uri).map(|result| result.map(Into::into)) })
    }

    fn complete<'a>(
        &'a self,
        request: &'a CompleteRequestParams,
        _ctx: ExtensionContext,
    ) -> ExtensionFuture<'a, CompletionInfo> {
        Box::pin(async move { catalog::complete(request) })
    }
}

/// Builds an rmcp model value from its wire JSON, so fixtures read like the suite's descriptions.
/// The literals are ours, so a failure is a bug in this file, reported as an internal error.
fn wire<T: DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|e| ErrorData::internal_error(format!("fixture does not parse: {e}"), None))
}

/// Like [`wire`], for the static catalogues: a fixture that does not parse is left out (and
/// logged), which the suite then reports by name.
fn wire_or_skip<T: DeserializeOwned>(values: Vec<Value>) -> Vec<T> {
    values
        .into_iter()
        .filter_map(|value| {
            serde_json::from_value(value.clone())
                .inspect_err(|e| tracing::error!(fixture = %value, error = %e, "fixture does not parse"))
                .ok()
        })
        .collect()
}

/// A 1×1 red PNG.
const RED_PIXEL_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// A tenth of a second of 8 kHz, 8-bit mono silence as a WAV file, base64.
fn silent_wav() -> String {
    use base64::Engine;
    const SAMPLES: u32 = 800;
    let mut wav = Vec::with_capacity(44 + SAMPLES as usize);
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + SAMPLES).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // mono
    wav.extend_from_slice(&8000u32.to_le_bytes()); // sample rate
    wav.extend_from_slice(&8000u32.to_le_bytes()); // byte rate
    wav.extend_from_slice(&1u16.to_le_bytes()); // block align
    wav.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&SAMPLES.to_le_bytes());
    wav.resize(44 + SAMPLES as usize, 0x80); // 8-bit PCM silence is the midpoint
    base64::engine::general_purpose::STANDARD.encode(wav)
}
