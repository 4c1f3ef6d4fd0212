-- wrk script for bench/run.sh (issue 11): JSON-RPC tools/call POSTs on existing MCP sessions.
--
-- Environment: MCP_SESSIONS (comma-separated session ids), MCP_TOKEN (bearer token, may be
-- empty), MCP_TOOL, MCP_ARGS (JSON object). Each wrk thread takes every n-th session and
-- cycles through its share, so 64 connections over 4 threads spread over 64 sessions. Request
-- ids are unique per thread (a session may have several requests in flight).
-- At the end one line `RESULT {json}` gives requests, seconds, p50/p99 in µs and errors.

local threads = {}

function setup(thread)
  thread:set("thread_index", #threads)
  table.insert(threads, thread)
end

function init(args)
  local all = {}
  for s in string.gmatch(os.getenv("MCP_SESSIONS") or "", "[^,]+") do
    table.insert(all, s)
  end
  mine = {}
  for i, s in ipairs(all) do
    if #all <= #threads or (i - 1) % #threads == thread_index then
      table.insert(mine, s)
    end
  end
  if #mine == 0 then
    mine = all
  end
  next_session = (thread_index % #mine) + 1
  counter = 0
  headers = {
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json, text/event-stream",
    ["MCP-Protocol-Version"] = "2025-11-25",
  }
  local token = os.getenv("MCP_TOKEN") or ""
  if token ~= "" then
    headers["Authorization"] = "Bearer " .. token
  end
  body_head = '{"jsonrpc":"2.0","method":"tools/call","params":{"name":"' .. os.getenv("MCP_TOOL") ..
    '","arguments":' .. os.getenv("MCP_ARGS") .. '},"id":'
  id_base = (thread_index + 1) * 1000000000
end

function request()
  counter = counter + 1
  headers["Mcp-Session-Id"] = mine[next_session]
  next_session = next_session % #mine + 1
  return wrk.format("POST", "/mcp", headers, body_head .. (id_base + counter) .. "}")
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'RESULT {"requests":%d,"seconds":%f,"p50_us":%d,"p99_us":%d,"errors":%d}\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.status + e.timeout))
end
