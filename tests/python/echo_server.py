"""An MCP server written with the official MCP Python SDK, to put behind the broker in the
gateway tests (tests/api/gateway/python.rs): one server behind the broker that is not ours.

Streamable HTTP on 127.0.0.1 (a free port, printed first as `listening on http://ADDR`), written
as if the broker did not exist. With --require-bearer BASE every request needs
`Authorization: Bearer <token>`, checked at the demo provider's BASE/api/me; otherwise 401 with
`WWW-Authenticate: Bearer`, as RFC 6750 §3 asks.

Tools:
- `whoami`: the demo-provider account the request's token belongs to and the first 12 hex digits
  of the token's SHA-256 (never the token), so a test can tell whose credential arrived; and the
  protocol revision the request spoke and whether it carried an `Mcp-Session-Id`.
- `ask_name` (2026-07-28 clients): answers with an `InputRequiredResult` asking a form question
  under the key `name` and a `requestState` of its own; on the retry, greets the name it was
  given, and says which state came back (so a test sees it arrive unchanged).
- `add_late_tool`: adds the tool `late_echo` to the server's list. A stateless server cannot
  say its list changed; the broker finds out by reading it again (`gateway.list_refresh`).
- `open_page` (2026-07-28 clients): the same with a URL elicitation to `https://vendor.example/…`
  under the key `page`; on the retry, says what the user did.
- `touch` (argument `uri`): tells the `subscriptions/listen` streams that hear the resource
  `uri` that it changed; `listening`: how many listen streams are open on the server.
- `chatty` (argument `tag`): sends `notifications/message` at debug, info and warning (logger
  `worker`, each text starting with the tag) on the request's stream, as far as the request's
  `_meta` logLevel lets it (2026-07-28: none without one), then answers.

Prompts: `greeting` (argument `name`), whose message names that account too; `ask_greeting`
(2026-07-28 clients), which first answers with an `InputRequiredResult` asking the name (key
`name`, state `python-state-prompt`) and on the retry greets it, naming the state it got back.
Resources: `pynote://hello`, a template `pynote://whoami/{label}` whose text is that account,
and a template `pynote://ask/{label}` that asks the name the same way (state
`python-state-read`) before it reads as `{label}: {name} ({state})`.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import socket

import anyio
import httpx2
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitRequestURLParams, InputRequiredResult
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send


def bearer(headers: dict[bytes, bytes] | None, value: str | None = None) -> str | None:
    """The token of an `Authorization: Bearer` header, if there is one."""
    if value is None and headers is not None:
        raw = headers.get(b"authorization")
        value = raw.decode("latin-1") if raw is not None else None
    if value is None or not value.startswith("Bearer "):
        return None
    return value[len("Bearer ") :]


async def account_of(me_url: str, token: str) -> str | None:
    """The demo provider's account for `token`, or None if it refuses it."""
    async with httpx2.AsyncClient(timeout=10) as http:
        answer = await http.get(me_url, headers={"authorization": f"Bearer {token}"})
    if answer.status_code != 200:
        return None
    return answer.json().get("account")


class RequireBearer:
    """ASGI middleware: a request without a token the demo provider accepts gets 401."""

    def __init__(self, app: ASGIApp, me_url: str) -> None:
        self.app = app
        self.me_url = me_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            token = bearer(dict(scope["headers"]))
            if token is None or await account_of(self.me_url, token) is None:
                refusal = PlainTextResponse("unauthorized", 401, headers={"WWW-Authenticate": "Bearer"})
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def server(me_url: str | None) -> MCPServer:
    # The SDK's own bus, held here so `listening` can count its streams.
    bus = InMemorySubscriptionBus()
    mcp = MCPServer("python-echo", subscriptions=bus)

    @mcp.tool(description="Tells the listeners of the resource uri that it changed")
    async def touch(uri: str, ctx: Context) -> dict[str, str]:
        await ctx.notify_resource_updated(uri)
        return {"touched": uri}

    @mcp.tool(description="How many subscriptions/listen streams are open on this server")
    async def listening() -> dict[str, int]:
        return {"streams": len(bus._listeners)}

    @mcp.tool(description="Which demo-provider account the credential this server received belongs to")
    async def whoami(ctx: Context) -> dict[str, str | None]:
        headers = ctx.headers or {}
        token = bearer(None, headers.get("authorization"))
        if token is None:
            return {"account": None, "credential_sha256": ""}
        account = await account_of(me_url, token) if me_url else None
        return {
            "account": account,
            "credential_sha256": hashlib.sha256(token.encode()).hexdigest()[:12],
            "protocol": ctx.protocol_version,
            "session": headers.get("mcp-session-id"),
        }

    @mcp.tool(description="Adds the tool `late_echo` to this server's list (a list that changes)")
    async def add_late_tool() -> dict[str, bool]:
        def late_echo(text: str) -> dict[str, str]:
            """Echoes its text; listed only after add_late_tool."""
            return {"text": text}

        mcp.add_tool(late_echo, name="late_echo")
        return {"added": True}

    @mcp.tool(description="Sends a log message at debug, info and warning, each naming `tag`, then answers")
    async def chatty(tag: str, ctx: Context) -> dict[str, int]:
        for level, text in (("debug", "details"), ("info", "working"), ("warning", "careful")):
            await ctx.log(level, f"{tag}: {text}", logger_name="worker")
        return {"logged": 3}

    @mcp.tool(description="Asks the user's name by a round trip, then greets it")
    async def ask_name(ctx: Context) -> InputRequiredResult | dict[str, str | None]:
        answer = (ctx.input_responses or {}).get("name")
        if ctx.request_state is None or answer is None:
            schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
            question = ElicitRequestFormParams(message="What is your name?", requested_schema=schema)
            return InputRequiredResult(
                input_requests={"name": ElicitRequest(params=question)}, request_state="python-state-1"
            )
        content = answer.content or {}
        return {"action": answer.action, "name": content.get("name"), "state": ctx.request_state}

    @mcp.tool(description="Sends the user to a page of its own by a round trip")
    async def open_page(ctx: Context) -> InputRequiredResult | dict[str, str | None]:
        answer = (ctx.input_responses or {}).get("page")
        if ctx.request_state is None or answer is None:
            page = ElicitRequestURLParams(
                message="Sign in to the vendor.", url="https://vendor.example/login", elicitation_id="vendor-1"
            )
            return InputRequiredResult(
                input_requests={"page": ElicitRequest(params=page)}, request_state="python-state-page"
            )
        return {"action": answer.action, "state": ctx.request_state}

    async def account_in(ctx: Context) -> str | None:
        token = bearer(None, (ctx.headers or {}).get("authorization"))
        return await account_of(me_url, token) if token and me_url else None

    @mcp.prompt(description="Greets someone on behalf of the caller's account")
    async def greeting(name: str, ctx: Context) -> str:
        return f"Greet {name} on behalf of {await account_in(ctx)}."

    def asked_name(ctx: Context, state: str) -> InputRequiredResult | str:
        """The name the client gave on its retry, or the round that asks it."""
        answer = (ctx.input_responses or {}).get("name")
        if ctx.request_state is None or answer is None:
            schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
            question = ElicitRequestFormParams(message="Who is reading?", requested_schema=schema)
            return InputRequiredResult(input_requests={"name": ElicitRequest(params=question)}, request_state=state)
        return f"{(answer.content or {}).get('name')} ({ctx.request_state})"

    @mcp.prompt(description="Asks who is reading by a round trip, then greets them")
    async def ask_greeting(ctx: Context) -> InputRequiredResult | str:
        name = asked_name(ctx, "python-state-prompt")
        return name if isinstance(name, InputRequiredResult) else f"Hello {name}."

    @mcp.resource("pynote://ask/{label}", mime_type="text/plain")
    async def ask_note(label: str, ctx: Context) -> InputRequiredResult | str:
        name = asked_name(ctx, "python-state-read")
        return name if isinstance(name, InputRequiredResult) else f"{label}: {name}"

    @mcp.resource("pynote://hello", mime_type="text/plain")
    def hello() -> str:
        return "hello from python"

    @mcp.resource("pynote://whoami/{label}", mime_type="text/plain")
    async def whoami_note(label: str, ctx: Context) -> str:
        return f"{label}: {await account_in(ctx)}"

    return mcp


async def main() -> None:
    # The SDK and its HTTP client log every request at INFO; the test reads stdout only.
    logging.disable(logging.INFO)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--require-bearer", metavar="BASE", help="the demo provider's base URL")
    args = parser.parse_args()
    me_url = f"{args.require_bearer.rstrip('/')}/api/me" if args.require_bearer else None

    app: ASGIApp = server(me_url).streamable_http_app(host="127.0.0.1")
    if me_url:
        app = RequireBearer(app, me_url)
    # Bound here, so the port is known before the server starts and no other process takes it.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    host, port = sock.getsockname()
    print(f"listening on http://{host}:{port}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    anyio.run(main)
