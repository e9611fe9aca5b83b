"""Streamable HTTP: every request carries an API key, and its tools run as that key's principal.

`BearerKeys` wraps the SDK's Starlette app: a request without `Authorization: Bearer <key>`,
or with a malformed, unknown or revoked key, gets the REST API's 401 problem+json (with its
request id, in the body and the X-Request-ID header) before it reaches MCP; an accepted one
carries its principal in the request scope, where `request_principal` finds it for each tool
call. The tenant therefore always comes from the key, never from a tool's arguments. The
server is stateless (no MCP session state between requests), like the REST API.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from mnemo_sea.archive import Archive, Principal, Unauthenticated
from mnemo_sea.rest.admission import TenantAdmission, admission_of
from mnemo_sea.rest.limits import BodyLimit, JsonValueLimit
from mnemo_sea.rest.observability import RequestIds
from mnemo_sea.rest.problems import domain_problem
from mnemo_sea.system.mnemo import Mnemo
from mnemo_sea.system.wiring.settings import MnemoSettings

from .server import Context, build_server

PRINCIPAL_STATE = "mnemo_principal"
MCP_PATH = "/mcp"


DEFAULT_MAX_REQUEST_BYTES = MnemoSettings.model_fields["max_request_bytes"].default


def bearer_key(scope: Scope) -> str:
    """The key of `Authorization: Bearer <key>`. Raises Unauthenticated when there is none."""
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, key = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() == "bearer" and key.strip():
                return key.strip()
            break
    raise Unauthenticated("an API key is required: send Authorization: Bearer <key>")


class BearerKeys:
    """ASGI middleware: authenticate each HTTP request's API key, or answer 401."""

    def __init__(self, app: ASGIApp, archive: Archive) -> None:
        self.app = app
        self.archive = archive

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan: the SDK's session manager starts and stops here
            await self.app(scope, receive, send)
            return
        try:
            key = bearer_key(scope)
            principal = await anyio.to_thread.run_sync(self.archive.authenticate, key)
        except Unauthenticated as e:
            # The REST API's answer, from the one outcome table: 401 problem+json.
            response = domain_problem(Request(scope), e)
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})[PRINCIPAL_STATE] = principal
        await self.app(scope, receive, send)


def request_principal(ctx: Context) -> Principal:
    """The principal `BearerKeys` attached to the HTTP request that carried this call."""
    request: Any = ctx.request
    state = getattr(request, "scope", {}).get("state", {})
    principal = state.get(PRINCIPAL_STATE)
    if not isinstance(principal, Principal):  # only reachable if the app is mounted without BearerKeys
        raise Unauthenticated("this request carries no authenticated API key")
    return principal


def http_app(
    mnemo: Mnemo,
    *,
    host: str = "127.0.0.1",
    path: str = MCP_PATH,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    admission: TenantAdmission | None = None,
) -> ASGIApp:
    """The streamable-HTTP MCP app at `path`, behind API-key authentication and the same request
    body limits as the REST API (413 above `max_request_bytes`, or past BODY_JSON_VALUES values,
    checked after the key); every answer, a 401 or 413 problem included, carries its request id
    (X-Request-ID, echoed when the client sent one). Tool calls take turns by tenant in
    `admission` (by default, the REST API's default shares: `admission_of(MnemoSettings())`).

    `host` is where it will listen: on a loopback address the SDK also refuses requests whose
    Host or Origin header is not loopback (DNS-rebinding protection).
    """
    shares = admission if admission is not None else admission_of(MnemoSettings())
    server = build_server(mnemo, request_principal, shares)
    app = server.streamable_http_app(
        streamable_http_path=path, stateless_http=True, json_response=True, host=host
    )
    keyed = BearerKeys(JsonValueLimit(app), mnemo.archive)
    return RequestIds(BodyLimit(keyed, max_request_bytes))


def serve_http(
    mnemo: Mnemo,
    *,
    host: str,
    port: int,
    path: str = MCP_PATH,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    admission: TenantAdmission | None = None,
) -> None:
    """Serve streamable HTTP until interrupted (SIGINT/SIGTERM)."""
    import uvicorn

    app = http_app(mnemo, host=host, path=path, max_request_bytes=max_request_bytes, admission=admission)
    uvicorn.run(app, host=host, port=port, log_level="info")
