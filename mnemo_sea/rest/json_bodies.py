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
- a body with more than limits.BODY_JSON_VALUES values (archive/rules/limits.py) is refused with 413
  before it is parsed: counting them is a scan of the bytes (`limits.json_values_over`), and the
  records' own caps admit no more than that; a body that is not UTF-8 is no JSON here
  (json.loads would read UTF-16, which the scan cannot count);
- a body over INLINE_PARSE_BYTES or INLINE_PARSE_VALUES is parsed in the thread pool, in a
  turn of the caller's tenant (rest/admission.py), so its CPU is the tenant's and it waits its
  turn. json.loads holds the GIL while it runs: the value cap, not the thread, bounds how long
  (about 0.3 s at the cap).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from mnemo_sea.archive import InvalidInput, limits
from mnemo_sea.rest.admission import TenantAdmission, charged
from mnemo_sea.rest.limits import TOO_MANY_VALUES
from mnemo_sea.system.json_text import parse_json

RouteHandler = Callable[[Request], Coroutine[Any, Any, Response]]
# Verifies the request's key (raising Unauthenticated), leaving its tenant on the request state.
Authenticate = Callable[[Request], Awaitable[object]]

# Bodies up to this size and count of values are parsed on the event loop: a thread hop costs
# more than they do (json.loads of 2,000 values is tens of microseconds).
INLINE_PARSE_BYTES = 256 * 1024
INLINE_PARSE_VALUES = 2_000


class JsonBodyRequest(Request):
    """A request whose JSON body is parsed once: by `_parse` before the route, or here by
    `parse_json` (JsonTooDeep past the limit); a parse that failed fails again the same way."""

    _outcome: Any

    async def json(self) -> Any:
        if not hasattr(self, "_outcome"):
            self._outcome = _parsed(await self.body())
        if isinstance(self._outcome, Exception):
            raise self._outcome
        return self._outcome


def _json_content(content_type: str | None) -> bool:
    """Whether FastAPI would parse a body of this Content-Type as JSON (none counts)."""
    essence = (content_type or "").split(";", 1)[0].strip().lower()
    return essence in ("", "application/json") or (
        essence.startswith("application/") and essence.endswith("+json")
    )


def _parsed(body: bytes) -> Any:
    """The body's JSON, or the ValueError that says why it is none (not JSON, invalid UTF-8),
    which FastAPI answers as it always did. JsonTooDeep, and InvalidInput for a body in UTF-16
    or UTF-32, are raised: the problem handlers answer them (422, saying what is wrong)."""
    # json.loads takes UTF-16 and UTF-32 too, which the value count's byte scan cannot read
    # (RFC 8259: JSON between systems is UTF-8).
    encoding = json.detect_encoding(body)
    if encoding not in ("utf-8", "utf-8-sig"):
        raise InvalidInput("body", f"JSON must be sent as UTF-8 (RFC 8259), not {encoding.upper()}")
    try:
        return parse_json(body, "body")
    except ValueError as e:
        return e


async def _parse(request: JsonBodyRequest, body: bytes) -> None:
    if limits.json_values_over(body, limits.BODY_JSON_VALUES):
        raise HTTPException(413, TOO_MANY_VALUES)
    admission: TenantAdmission | None = getattr(request.app.state, "admission", None)
    tenant: str | None = getattr(request.state, "tenant_id", None)
    small = len(body) <= INLINE_PARSE_BYTES and not limits.json_values_over(body, INLINE_PARSE_VALUES)
    if small or admission is None or tenant is None:
        request._outcome = _parsed(body)
    else:
        async with admission.slot(tenant) as turn:
            request._outcome = await run_in_threadpool(charged, turn, _parsed, body)


def depth_checked(handler: RouteHandler, authenticate: Authenticate | None = None) -> RouteHandler:
    """`handler` run on a JsonBodyRequest whose body, when JSON, was parsed (and its nesting
    checked) before it, after `authenticate` when the route needs a key (whatever the body's
    type: FastAPI reads every body before the key check): JsonTooDeep, Unauthenticated and the
    413 raised from here reach the app's problem handlers."""

    async def run(request: Request) -> Response:
        checked = JsonBodyRequest(request.scope, request.receive)
        if _may_have_body(checked):
            if authenticate is not None:
                await authenticate(checked)
            if _json_content(checked.headers.get("content-type")):
                body = await checked.body()
                if body:
                    await _parse(checked, body)
        return await handler(checked)

    return run


def _may_have_body(request: Request) -> bool:
    return request.method not in ("GET", "HEAD", "OPTIONS") or "content-length" in request.headers
