//! The names a gateway server is registered under: its name, the prefix of its tools,
//! the header its credential goes in. Parsed once, at the admin CLI and in the store; the
//! messages are the operator's words.

use std::fmt;

/// The longest server name.
pub const NAME_MAX: usize = 32;
/// The longest prefix: a tool keeps at least 64 characters of its own name within the
/// 128 that MCP tool names are held to.
pub const PREFIX_MAX: usize = 64;
/// The longest tool name the broker lists (MCP 2025-11-25 server/tools §Tool names).
pub const TOOL_NAME_MAX: usize = 128;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GatewayNameError {
    #[error("a server name is 1-{NAME_MAX} characters of a-z, 0-9 or '-', got {0:?}")]
    Name(String),
    #[error("a tool prefix is 1-{PREFIX_MAX} characters of A-Z, a-z, 0-9, '_' or '-', got {0:?}")]
    Prefix(String),
    #[error("{0:?} is not an HTTP header name (letters, digits and -, e.g. Authorization or X-Api-Key)")]
    Header(String),
    #[error("{0:?} cannot carry a credential: the broker sets it itself")]
    ReservedHeader(String),
    #[error("a scheme is a single word of letters, digits or '-' (e.g. Bearer, Token), got {0:?}")]
    Scheme(String),
}

/// A registered server's name: `[a-z0-9-]{1,32}`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerName(String);

impl ServerName {
    pub fn parse(value: &str) -> Result<Self, GatewayNameError> {
        let ok = !value.is_empty()
            && value.len() <= NAME_MAX
            && value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if ok { Ok(Self(value.to_owned())) } else { Err(GatewayNameError::Name(value.to_owned())) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The prefix a server gets when the operator names none: its name with `-` as `_`, then `_`.
    pub fn default_prefix(&self) -> ToolPrefix {
        ToolPrefix(format!("{}_", self.0.replace('-', "_")))
    }
}

impl fmt::Display for ServerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// What goes before each of a server's tool names: `[A-Za-z0-9_-]{1,64}`, so every listed name
/// stays within the characters MCP clients accept.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolPrefix(String);

impl ToolPrefix {
    pub fn parse(value: &str) -> Result<Self, GatewayNameError> {
        let ok = !value.is_empty() && value.len() <= PREFIX_MAX && value.bytes().all(tool_name_byte);
        if ok { Ok(Self(value.to_owned())) } else { Err(GatewayNameError::Prefix(value.to_owned())) }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether one prefix begins with the other: their servers' tool names could collide
    /// (`a_` and `a_b_` both claim `a_b_x`).
    pub fn overlaps(&self, other: &ToolPrefix) -> bool {
        self.0.starts_with(&other.0) || other.0.starts_with(&self.0)
    }

    /// The name a server's tool is listed under, if it fits: `[A-Za-z0-9_-]`, at most
    /// [`TOOL_NAME_MAX`] with the prefix.
    pub fn apply(&self, tool: &str) -> Option<String> {
        let fits = !tool.is_empty() && self.0.len() + tool.len() <= TOOL_NAME_MAX && tool.bytes().all(tool_name_byte);
        fits.then(|| format!("{}{tool}", self.0))
    }
}

impl fmt::Display for ToolPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

fn tool_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Headers the MCP transport sets itself; a credential in one would clash or be overwritten.
const RESERVED_HEADERS: [&str; 7] =
    ["accept", "content-type", "content-length", "host", "mcp-session-id", "mcp-protocol-version", "last-event-id"];

/// The header a credential is sent in, as the operator spelled it (HTTP header names are
/// case-insensitive; `http` lower-cases them when sending).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialHeader(String);

impl CredentialHeader {
    pub fn parse(value: &str) -> Result<Self, GatewayNameError> {
        let ok = !value.is_empty()
            && value.len() <= 64
            && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && value.bytes().next().is_some_and(|b| b.is_ascii_alphabetic());
        if !ok {
            return Err(GatewayNameError::Header(value.to_owned()));
        }
        if RESERVED_HEADERS.contains(&value.to_ascii_lowercase().as_str()) {
            return Err(GatewayNameError::ReservedHeader(value.to_owned()));
        }
        Ok(Self(value.to_owned()))
    }

    /// `Authorization`, the default.
    pub fn authorization() -> Self {
        Self("Authorization".to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The word before a provider token in its header (`Bearer`), or none (`--scheme ""`: the
/// header carries the bare token, as some API-key headers want).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialScheme(String);

impl CredentialScheme {
    pub fn parse(value: &str) -> Result<Self, GatewayNameError> {
        let ok = value.len() <= 32 && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if ok { Ok(Self(value.to_owned())) } else { Err(GatewayNameError::Scheme(value.to_owned())) }
    }

    /// `Bearer`, the default (RFC 6750 §2.1).
    pub fn bearer() -> Self {
        Self("Bearer".to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The header value for `token`.
    pub fn value(&self, token: &str) -> String {
        if self.0.is_empty() { token.to_owned() } else { format!("{} {token}", self.0) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_are_short_lowercase_words_and_give_a_default_prefix() {
        let name = ServerName::parse("my-notes").unwrap();
        assert_eq!(name.default_prefix().as_str(), "my_notes_");
        for bad in ["", "Notes", "my_notes", "a b", "../x", &"x".repeat(33)] {
            assert!(ServerName::parse(bad).is_err(), "{bad:?}");
        }
        assert!(ServerName::parse(&"x".repeat(32)).is_ok());
    }

    /// `admin servers list` pads its columns with `{:<20}`: a name that ignored the width
    /// shifted every column after it.
    #[test]
    fn names_and_prefixes_fill_the_width_a_table_gives_them() {
        let name = ServerName::parse("notes").unwrap();
        assert_eq!(format!("{name:<8}|{:<8}|", name.default_prefix()), "notes   |notes_  |");
    }

    #[test]
    fn a_prefix_keeps_tool_names_within_what_clients_accept() {
        let prefix = ToolPrefix::parse("gh_").unwrap();
        assert_eq!(prefix.apply("whoami").as_deref(), Some("gh_whoami"));
        assert_eq!(prefix.apply("with.dot"), None);
        assert_eq!(prefix.apply(""), None);
        assert_eq!(prefix.apply(&"x".repeat(126)), None, "129 characters with the prefix");
        assert!(prefix.apply(&"x".repeat(125)).is_some());
        for bad in ["", "a.b", "a b", "é", &"x".repeat(65)] {
            assert!(ToolPrefix::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn prefixes_that_begin_one_another_overlap() {
        let a = ToolPrefix::parse("a_").unwrap();
        assert!(a.overlaps(&ToolPrefix::parse("a_b_").unwrap()));
        assert!(a.overlaps(&a));
        assert!(!a.overlaps(&ToolPrefix::parse("b_").unwrap()));
    }

    #[test]
    fn credential_headers_are_plain_names_and_never_the_transports_own() {
        assert!(CredentialHeader::parse("X-Api-Key").is_ok());
        for bad in ["", "X Api", "X:Key", "-x", "X_Key"] {
            assert!(matches!(CredentialHeader::parse(bad), Err(GatewayNameError::Header(_))), "{bad:?}");
        }
        for reserved in ["Mcp-Session-Id", "accept", "Host", "Content-Type"] {
            assert!(matches!(CredentialHeader::parse(reserved), Err(GatewayNameError::ReservedHeader(_))));
        }
        assert_eq!(CredentialScheme::bearer().value("t"), "Bearer t");
        assert_eq!(CredentialScheme::parse("").unwrap().value("t"), "t");
        assert!(CredentialScheme::parse("Bearer x").is_err());
    }
}
