"""Request bodies parsed by the one JSON parser, after the caller's key, in bounded time.

FastAPI parses a JSON body itself and turns any error but a syntax error into a generic 400,
and a body nested a few hundred levels deep parses, is stored, and then fails to serialise in
the answer: a 500 for a request that changed state. So each route's body is parsed here first,
before FastAPI's own handling and before any work: deeper than MAX_JSON_DEPTH is JsonTooDeep,
a 422 `json_too_deep` problem naming the limit; FastAPI then reads the parsed value, not the
bytes again. A body that is not JSON at all is left to FastAPI's own answer (422 as before).

Parsing is work, and it used to run on the event loop before the key was looked at: one
anonymous 40 MiB body of `[],[],...` held the loop, and so every tenant's requests, for 7 s
in `json.loads` and 77 s in the depth check. Now, on a route that needs a key:
- the key is verified from the headers first, so a caller without one gets its 401 before a
  byte of the body is read;
- a body with more than BODY_JSON_VALUES values (archive/limits.py) is refused with 413
  before it is parsed: counting them is a scan of the bytes (`json_values_over`), and the
  records' own caps admit far fewer, so no valid request is near it;
- a body over INLINE_PARSE_BYTES is parsed in the thread pool, in a turn of the caller's
  tenant (rest/admission.py), so its CPU is the tenant's and the loop keeps serving the others.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from mnemo_sea.archive.limits import BODY_JSON_VALUES, json_values_over
from mnemo_sea.rest.admission import TenantAdmission, charged
from mnemo_sea.system.json_text import parse_json

RouteHandler = Callable[[Request], Coroutine[Any, Any, Response]]
# Verifies the request's key (raising Unauthenticated), leaving its tenant on the request state.
Authenticate = Callable[[Request], Awaitable[object]]

# Bodies up to this size are parsed on the event loop: a thread hop costs more than they do.
INLINE_PARSE_BYTES = 256 * 1024


class JsonBodyRequest(Request):
    """A request whose JSON body is parsed once, by `parse_json` (JsonTooDeep past the limit)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse_json(await self.body(), "body")
        return self._json


def _json_content(content_type: str | None) -> bool:
    """Whether FastAPI would parse a body of this Content-Type as JSON (none counts)."""
    essence = (content_type or "").split(";", 1)[0].strip().lower()
    return essence in ("", "application/json") or (
        essence.startswith("application/") and essence.endswith("+json")
    )


def _parsed(body: bytes) -> Any:
    """The body's JSON; ValueError (not JSON, not UTF-8) is FastAPI's to answer, as it always was."""
    with contextlib.suppress(ValueError):
        return parse_json(body, "body")
    return None


async def _parse(request: JsonBodyRequest, body: bytes) -> None:
    if json_values_over(body, BODY_JSON_VALUES):
        raise HTTPException(
            413, f"the request body holds more than {BODY_JSON_VALUES} JSON values; send less per request"
        )
    admission: TenantAdmission | None = getattr(request.app.state, "admission", None)
    tenant: str | None = getattr(request.state, "tenant_id", None)
    if len(body) <= INLINE_PARSE_BYTES or admission is None or tenant is None:
        parsed = _parsed(body)
    else:
        async with admission.slot(tenant) as turn:
            parsed = await run_in_threadpool(charged, turn, _parsed, body)
    if parsed is not None:
        request._json = parsed


def depth_checked(handler: RouteHandler, authenticate: Authenticate | None = None) -> RouteHandler:
    """`handler` run on a JsonBodyRequest whose body, when JSON, was parsed (and its nesting
    checked) before it, after `authenticate` when the route needs a key: JsonTooDeep,
    Unauthenticated and the 413 raised from here reach the app's problem handlers."""

    async def run(request: Request) -> Response:
        checked = JsonBodyRequest(request.scope, request.receive)
        if _json_content(checked.headers.get("content-type")) and _may_have_body(checked):
            if authenticate is not None:
                await authenticate(checked)
            body = await checked.body()
            if body:
                await _parse(checked, body)
        return await handler(checked)

    return run


def _may_have_body(request: Request) -> bool:
    return request.method not in ("GET", "HEAD", "OPTIONS") or "content-length" in request.headers
