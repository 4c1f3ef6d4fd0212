// The TypeScript SDK's echo server: the second baseline of bench/run.sh (issue 11). The same
// `echo` tool as examples/echo_server.rs (input {text}, answer {text} as structured content and
// as its JSON text), served the way the SDK's own stateful example does
// (src/examples/server/simpleStreamableHttp.ts in @modelcontextprotocol/sdk 1.32): express from
// createMcpExpressApp, one StreamableHTTPServerTransport per session with a random session id,
// SSE answers (the SDK's default, like rmcp's). No authentication, no database.
//
//   node bench/ts-echo/server.mjs [--listen 127.0.0.1:PORT]   (or PORT=…; 0 picks a free port)
//
// Always binds 127.0.0.1; prints `listening on http://127.0.0.1:PORT` as its first line.
// bench/run.sh installs Node 22 under bench/.node/ and @modelcontextprotocol/sdk (pinned) under
// bench/ts-echo/node_modules/, where this module's imports resolve (both git-ignored).
import { randomUUID } from 'node:crypto';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

function listenPort() {
  const i = process.argv.indexOf('--listen');
  const spec = i >= 0 ? process.argv[i + 1] : process.env.PORT ?? '0';
  const port = Number(String(spec).split(':').pop());
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`bad port: ${spec}`);
    process.exit(2);
  }
  return port;
}

function echoServer() {
  const server = new McpServer({ name: 'ts-echo', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.registerTool(
    'echo',
    { description: 'Echoes its text', inputSchema: { text: z.string().optional() } },
    async ({ text }) => {
      const structured = { text: text ?? '' };
      return { content: [{ type: 'text', text: JSON.stringify(structured) }], structuredContent: structured };
    },
  );
  return server;
}

const transports = new Map();
const app = createMcpExpressApp({ host: '127.0.0.1' });

app.post('/mcp', async (req, res) => {
  const id = req.headers['mcp-session-id'];
  let transport = id ? transports.get(id) : undefined;
  if (!transport) {
    if (id || !isInitializeRequest(req.body)) {
      res.status(id ? 404 : 400).json({
        jsonrpc: '2.0',
        error: { code: -32000, message: id ? 'Session not found' : 'Bad Request: No valid session ID provided' },
        id: null,
      });
      return;
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sid) => transports.set(sid, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId) transports.delete(transport.sessionId);
    };
    await echoServer().connect(transport);
  }
  await transport.handleRequest(req, res, req.body);
});

// GET (the standalone SSE stream) and DELETE (end of session) go to the session's transport.
const bySession = async (req, res) => {
  const transport = transports.get(req.headers['mcp-session-id']);
  if (!transport) {
    res.status(404).send('Session not found');
    return;
  }
  await transport.handleRequest(req, res);
};
app.get('/mcp', bySession);
app.delete('/mcp', bySession);

const listener = app.listen(listenPort(), '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${listener.address().port}`);
});
// Small JSON-RPC answers: without TCP_NODELAY Nagle's algorithm holds them back (Node sets it
// by default since 18; set it anyway, as examples/echo_server.rs does).
listener.on('connection', (socket) => socket.setNoDelay(true));
process.on('SIGTERM', () => process.exit(0));
