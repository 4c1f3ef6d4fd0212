//! Live MCP sessions.

#[derive(Debug, Default)]
pub struct SessionRegistry {}
