"""Request bodies parsed by the one JSON parser, with its nesting limit (system/json_text).

FastAPI parses a JSON body itself and turns any error but a syntax error into a generic 400,
and a body nested a few hundred levels deep parses, is stored, and then fails to serialise in
the answer: a 500 for a request that changed state. So each route's body is parsed here first,
before FastAPI's own handling and before any work: deeper than MAX_JSON_DEPTH is JsonTooDeep,
a 422 `json_too_deep` problem naming the limit; FastAPI then reads the parsed value, not the
bytes again. A body that is not JSON at all is left to FastAPI's own answer (422 as before).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from mnemo_sea.system.json_text import parse_json

RouteHandler = Callable[[Request], Coroutine[Any, Any, Response]]


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


def depth_checked(handler: RouteHandler) -> RouteHandler:
    """`handler` run on a JsonBodyRequest whose body, when JSON, was parsed (and its nesting
    checked) before it: JsonTooDeep raised from here reaches the app's problem handlers."""

    async def run(request: Request) -> Response:
        checked = JsonBodyRequest(request.scope, request.receive)
        if _json_content(checked.headers.get("content-type")) and await checked.body():
            # Not JSON, or not UTF-8 (ValueErrors): FastAPI answers it below, as it always did.
            with contextlib.suppress(ValueError):
                await checked.json()
        return await handler(checked)

    return run
