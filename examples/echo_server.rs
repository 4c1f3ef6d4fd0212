//! A bare rmcp Streamable HTTP server with one `echo` tool: the baseline `bench/run.sh` measures
//! the broker against (issue 11). Same rmcp version and transport settings as the broker's /mcp
//! (stateful sessions, SSE answers, rmcp's in-memory session manager), nothing else: no
//! authentication, no database.
//!
//! `cargo run --release --example echo_server -- --listen 127.0.0.1:0` prints
//! `listening on http://ADDR` as its first line.

use std::net::SocketAddr;
use std::sync::Arc;

use clap::Parser;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};
use serde_json::json;

#[derive(Parser)]
#[command(about = "A bare rmcp echo server, the baseline of the broker's benchmark")]
struct Args {
    /// Address to listen on; port 0 picks a free one (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
}

#[derive(Clone)]
struct Echo {
    tools: Arc<Vec<Tool>>,
}

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult { tools: self.tools.as_ref().clone(), ..Default::default() })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != "echo" {
            return Err(ErrorData::invalid_params(format!("unknown tool: {}", request.name), None));
        }
        let text = request.arguments.as_ref().and_then(|a| a.get("text")).and_then(|t| t.as_str()).unwrap_or_default();
        let structured = json!({ "text": text });
        let mut result = CallToolResult::structured(structured.clone());
        result.content = vec![ContentBlock::text(structured.to_string())];
        Ok(result.into())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
    let schema = Arc::new(schema.as_object().cloned().unwrap_or_default());
    let tools = Arc::new(vec![Tool::new("echo", "Echoes its text", schema)]);
    let config = StreamableHttpServerConfig::default();
    let service = StreamableHttpService::new(
        move || Ok(Echo { tools: tools.clone() }),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().route_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    println!("listening on http://{}", listener.local_addr()?);
    // Small JSON-RPC answers: without TCP_NODELAY Nagle's algorithm holds them back.
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router).await?;
    Ok(())
}
