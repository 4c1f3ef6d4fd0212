"""One tool call through the official MCP Python SDK's client, for the end-to-end tests in
tests/api/mcp/python_client.rs.

The SDK's `Client(mode="auto")` negotiates the protocol revision itself (`server/discover`, else
the `initialize` handshake) and, on 2026-07-28, drives multi round-trip requests (SEP-2322) on
its own: an `InputRequiredResult` goes to the elicitation callback below, and the SDK retries the
call with the answers and the echoed `requestState`. Nothing here beyond that callback takes part
in the rounds; that is what the tests check.

Speaks one JSON object per line on stdout, flushed at once, so the test can follow it:
  {"event": "connected", "protocolVersion": "..."}
  {"event": "url", "url": "...", "message": "..."}            a url-mode elicitation
  {"event": "form", "message": "...", "requestedSchema": {...}} a form-mode elicitation
  {"event": "result", "result": {...}}                          the call's final result
  {"event": "error", "error": "..."}                            the call failed (exit status 1)
and with --trace-requests, before each JSON-RPC request the SDK posts (it only watches):
  {"event": "request", "method": "...", "requestState": bool, "inputResponses": bool}

The bearer token comes from the environment (MCP_BEARER_TOKEN), never from the command line,
where any user of the machine could read it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp.client import Client, ClientRequestContext
from mcp.client.streamable_http import streamable_http_client


def emit(event: str, **fields: Any) -> None:
    """One line for the test to read; flushed so the test never waits on a buffer."""
    print(json.dumps({"event": event, **fields}), flush=True)


def elicitation_callback(form_answer: dict[str, Any] | None, decline_url: bool):
    """What a user would do: for a link, say it was opened (the test plays the browser) or
    decline it; for a form, give the answer the test chose."""

    async def answer(
        _context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        if isinstance(params, types.ElicitRequestURLParams):
            emit("url", url=params.url, message=params.message)
            return types.ElicitResult(action="decline" if decline_url else "accept")
        emit("form", message=params.message, requestedSchema=params.requested_schema)
        if form_answer is None:
            return types.ElicitResult(action="cancel")
        return types.ElicitResult(action="accept", content=form_answer)

    return answer


async def trace_request(request: httpx2.Request) -> None:
    """Says which request the SDK sends, so a test can tell a retry that carries only the state
    (the SDK's answer to "still waiting") from one that carries answers."""
    if request.method != "POST":
        return
    message = json.loads(await request.aread())
    params = message.get("params") or {}
    emit(
        "request",
        method=message.get("method"),
        requestState="requestState" in params,
        inputResponses=bool(params.get("inputResponses")),
    )


async def run(args: argparse.Namespace, token: str) -> int:
    headers = {"Authorization": f"Bearer {token}"}
    # The SDK's own timeouts for Streamable HTTP: a retry may wait on the browser for a while.
    timeout = httpx2.Timeout(30.0, read=300.0)
    hooks = {"request": [trace_request]} if args.trace_requests else {}
    async with httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks=hooks) as http:
        client = Client(
            streamable_http_client(args.url, http_client=http),
            mode="auto",
            elicitation_callback=elicitation_callback(args.form_answer, args.decline_url),
        )
        async with client:
            emit("connected", protocolVersion=client.protocol_version)
            try:
                result = await client.call_tool(args.tool, args.arguments)
            except Exception as error:  # reported to the test, which fails with it
                emit("error", error=f"{type(error).__name__}: {error}")
                return 1
            emit("result", result=result.model_dump(mode="json", by_alias=True, exclude_none=True))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description="One MCP tool call through the Python SDK's client.")
    parser.add_argument("--url", required=True, help="the broker's /mcp endpoint")
    parser.add_argument("--tool", required=True, help="the tool to call")
    parser.add_argument("--arguments", type=json.loads, default={}, help="the tool's arguments, as JSON")
    parser.add_argument("--form-answer", type=json.loads, help="the content to accept any form with, as JSON")
    parser.add_argument("--decline-url", action="store_true", help="decline url-mode elicitations")
    parser.add_argument("--trace-requests", action="store_true", help="a line for each request the SDK sends")
    args = parser.parse_args()
    token = os.environ.get("MCP_BEARER_TOKEN")
    if not token:
        print("MCP_BEARER_TOKEN is not set", file=sys.stderr)
        return 2
    return anyio.run(run, args, token)


if __name__ == "__main__":
    sys.exit(main())
