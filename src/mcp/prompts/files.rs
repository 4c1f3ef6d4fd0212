//! Operator prompt files: parsing and validation of one file.
//!
//! Two formats, the same metadata:
//!
//! ```toml
//! # weekly_summary.toml
//! name = "weekly_summary"
//! title = "Weekly summary"
//! description = "Summarise a week of notes"
//!
//! [[arguments]]
//! name = "week"
//! description = "ISO week, e.g. 2025-W14"
//! required = true
//!
//! [[messages]]
//! role = "user"
//! content = { type = "text", text = "Summarise my notes of {{week}}." }
//!
//! [[messages]]
//! role = "user"
//! content = { type = "image", path = "images/chart.png" }          # mimeType optional
//!
//! [[messages]]
//! role = "assistant"
//! content = { type = "resource", uri = "https://intranet.example/style", mimeType = "text/markdown", text = "…" }
//! ```
//!
//! Markdown: TOML front matter between `+++` lines (no `messages`), and the body is the one
//! user text message. `name` defaults to the file stem.
//!
//! Everything a `prompts/get` could trip on is checked here, at load: names, roles, that every
//! `{{placeholder}}` names a declared argument, that images exist inside the prompts directory
//! and are under 1 MiB (they are read and base64-encoded now, not per request).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use rmcp::model::{
    ContentBlock, GetPromptResult, ImageContent, Prompt, PromptArgument, PromptMessage, ResourceContents, Role,
};
use serde::Deserialize;

use super::render::{Template, is_valid_name};

/// Largest prompt file read (bytes).
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// A prompt from a file, ready to render.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorPrompt {
    pub prompt: Prompt,
    pub messages: Vec<MessageTemplate>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MessageTemplate {
    pub role: Role,
    pub content: ContentTemplate,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ContentTemplate {
    Text(Template),
    /// Already base64-encoded.
    Image {
        data: String,
        mime_type: String,
    },
    Resource {
        uri: String,
        mime_type: Option<String>,
        text: Template,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read the file: {0}")]
    Read(#[from] std::io::Error),
    #[error("the file is larger than {MAX_FILE_BYTES} bytes")]
    TooLarge,
    #[error("unsupported file type (expected .toml or .md)")]
    UnsupportedType,
    #[error("invalid TOML: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("{0}")]
    Invalid(String),
}

fn invalid(message: impl Into<String>) -> FileError {
    FileError::Invalid(message.into())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlFile {
    name: Option<String>,
    title: Option<String>,
    description: Option<String>,
    #[serde(default)]
    arguments: Vec<ArgumentSpec>,
    #[serde(default)]
    messages: Vec<MessageSpec>,
}

/// Markdown front matter: the same keys without `messages` (the body is the message).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FrontMatter {
    name: Option<String>,
    title: Option<String>,
    description: Option<String>,
    #[serde(default)]
    arguments: Vec<ArgumentSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ArgumentSpec {
    name: String,
    title: Option<String>,
    description: Option<String>,
    #[serde(default)]
    required: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageSpec {
    role: RoleSpec,
    content: ContentSpec,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum RoleSpec {
    User,
    Assistant,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
enum ContentSpec {
    Text {
        text: String,
    },
    Image {
        path: String,
        #[serde(rename = "mimeType", alias = "mime_type")]
        mime_type: Option<String>,
    },
    Resource {
        uri: String,
        #[serde(rename = "mimeType", alias = "mime_type")]
        mime_type: Option<String>,
        text: String,
    },
}

/// Parses the file at `path` (inside `dir`, against which image paths resolve).
pub fn load(path: &Path, dir: &Path) -> Result<OperatorPrompt, FileError> {
    if std::fs::metadata(path)?.len() > MAX_FILE_BYTES {
        return Err(FileError::TooLarge);
    }
    let text = std::fs::read_to_string(path)?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    match extension(path).as_deref() {
        Some("toml") => parse_toml(&text, stem, dir),
        Some("md") => parse_markdown(&text, stem, dir),
        _ => Err(FileError::UnsupportedType),
    }
}

/// The lower-cased extension, if the file is one we read.
pub fn extension(path: &Path) -> Option<String> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    matches!(ext.as_str(), "toml" | "md").then_some(ext)
}

pub fn parse_toml(text: &str, stem: &str, dir: &Path) -> Result<OperatorPrompt, FileError> {
    let file: TomlFile = toml::from_str(text)?;
    build(file.name, stem, file.title, file.description, file.arguments, file.messages, dir)
}

pub fn parse_markdown(text: &str, stem: &str, dir: &Path) -> Result<OperatorPrompt, FileError> {
    let (front, body) = split_front_matter(text)?;
    let meta: FrontMatter = toml::from_str(front)?;
    let body = body.trim();
    if body.is_empty() {
        return Err(invalid("the Markdown body (the prompt's message) is empty"));
    }
    let message = MessageSpec { role: RoleSpec::User, content: ContentSpec::Text { text: body.to_owned() } };
    build(meta.name, stem, meta.title, meta.description, meta.arguments, vec![message], dir)
}

/// `+++\n<toml>\n+++\n<body>` → (toml, body).
fn split_front_matter(text: &str) -> Result<(&str, &str), FileError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or_default();
    if first.trim_end() != "+++" {
        return Err(invalid("a Markdown prompt must start with TOML front matter between `+++` lines"));
    }
    let mut offset = first.len();
    for line in lines {
        if line.trim_end() == "+++" {
            return Ok((&text[first.len()..offset], &text[offset + line.len()..]));
        }
        offset += line.len();
    }
    Err(invalid("the front matter has no closing `+++` line"))
}

fn build(
    name: Option<String>,
    stem: &str,
    title: Option<String>,
    description: Option<String>,
    arguments: Vec<ArgumentSpec>,
    messages: Vec<MessageSpec>,
    dir: &Path,
) -> Result<OperatorPrompt, FileError> {
    let name = name.unwrap_or_else(|| stem.to_owned());
    if !is_valid_name(&name) {
        return Err(invalid(format!("name {name:?} must be 1-128 characters of A-Z, a-z, 0-9, '_', '.' or '-'")));
    }
    let mut declared = HashSet::new();
    for argument in &arguments {
        if !is_valid_name(&argument.name) {
            return Err(invalid(format!(
                "argument name {:?} must be 1-128 characters of A-Z, a-z, 0-9, '_', '.' or '-'",
                argument.name
            )));
        }
        if !declared.insert(argument.name.as_str()) {
            return Err(invalid(format!("argument {:?} is declared twice", argument.name)));
        }
    }
    if messages.is_empty() {
        return Err(invalid("the prompt has no messages"));
    }
    let mut templates = Vec::with_capacity(messages.len());
    for (index, message) in messages.into_iter().enumerate() {
        let content = content(message.content, dir).map_err(|e| invalid(format!("message {}: {e}", index + 1)))?;
        let texts: Vec<&Template> = match &content {
            ContentTemplate::Text(t) | ContentTemplate::Resource { text: t, .. } => vec![t],
            ContentTemplate::Image { .. } => vec![],
        };
        for placeholder in texts.into_iter().flat_map(Template::placeholders) {
            if !declared.contains(placeholder) {
                return Err(invalid(format!(
                    "message {}: placeholder {{{{{placeholder}}}}} names no declared argument",
                    index + 1
                )));
            }
        }
        let role = match message.role {
            RoleSpec::User => Role::User,
            RoleSpec::Assistant => Role::Assistant,
        };
        templates.push(MessageTemplate { role, content });
    }
    let arguments: Vec<PromptArgument> = arguments
        .into_iter()
        .map(|a| {
            let mut argument = PromptArgument::new(a.name).with_required(a.required);
            argument.title = a.title;
            argument.description = a.description;
            argument
        })
        .collect();
    let mut prompt = Prompt::new(name, description, (!arguments.is_empty()).then_some(arguments));
    prompt.title = title;
    Ok(OperatorPrompt { prompt, messages: templates })
}

fn content(spec: ContentSpec, dir: &Path) -> Result<ContentTemplate, String> {
    Ok(match spec {
        ContentSpec::Text { text } => ContentTemplate::Text(Template::parse(&text)),
        ContentSpec::Image { path, mime_type } => {
            let (data, mime_type) = super::image::load(dir, &path, mime_type)?;
            ContentTemplate::Image { data, mime_type }
        }
        ContentSpec::Resource { uri, mime_type, text } => {
            url::Url::parse(&uri).map_err(|e| format!("resource uri {uri:?} is not a valid URI: {e}"))?;
            ContentTemplate::Resource { uri, mime_type, text: Template::parse(&text) }
        }
    })
}

impl OperatorPrompt {
    pub fn name(&self) -> &str {
        &self.prompt.name
    }

    pub fn arguments(&self) -> &[PromptArgument] {
        self.prompt.arguments.as_deref().unwrap_or_default()
    }

    /// The messages with `values` inserted (already checked against the declared arguments).
    pub fn render(&self, values: &BTreeMap<String, String>) -> GetPromptResult {
        let messages = self
            .messages
            .iter()
            .map(|m| {
                let content = match &m.content {
                    ContentTemplate::Text(t) => ContentBlock::text(t.render(values)),
                    ContentTemplate::Image { data, mime_type } => {
                        ContentBlock::Image(ImageContent::new(data.clone(), mime_type.clone()))
                    }
                    ContentTemplate::Resource { uri, mime_type, text } => {
                        ContentBlock::resource(ResourceContents::TextResourceContents {
                            uri: uri.clone(),
                            mime_type: mime_type.clone(),
                            text: text.render(values),
                            meta: None,
                        })
                    }
                };
                PromptMessage::new(m.role.clone(), content)
            })
            .collect();
        let result = GetPromptResult::new(messages);
        match &self.prompt.description {
            Some(d) => result.with_description(d.clone()),
            None => result,
        }
    }
}

#[cfg(test)]
mod tests;
