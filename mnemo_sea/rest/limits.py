"""The request body limits: 413 as problem+json, before an oversized body is read or parsed.

Starlette's own limiter (FastAPI's `max_body_size`) replaces whatever the app answered to a
request whose Content-Length is over the limit with a plain-text 413, without the request id
or the problem body clients parse, so the limit is enforced here instead: a declared length
over the limit is refused up front, and a body without one (chunked) is counted as it is read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mnemo_sea.archive import limits
from mnemo_sea.rest.problems import problem_response

# What a body past limits.BODY_JSON_VALUES is told, on REST (rest/json_bodies.py) and MCP (below).
TOO_MANY_VALUES = (
    f"the request body holds more than {limits.BODY_JSON_VALUES} JSON values; send less per request"
)


# How a body declared over the limit is answered: given the request, the detail and the sizes
# (`size`, `limit`), the 413 response. REST's is a problem; the console's a page.
Refusal = Callable[[Request, str, dict[str, Any]], Response]


def _problem(request: Request, detail: str, extra: dict[str, Any]) -> Response:
    return problem_response(request, 413, "request_too_large", detail, extra)


class BodyLimit:
    """ASGI middleware: request bodies above `max_bytes` get a 413 `request_too_large` answer
    (`refuse`'s; a problem by default)."""

    def __init__(self, app: ASGIApp, max_bytes: int, refuse: Refusal = _problem) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.refuse = refuse

    def _detail(self, size: str) -> str:
        return f"the request body ({size}) exceeds the limit of {self.max_bytes} bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            request = Request(scope, receive)
            # `size` and `limit` as ContentTooLarge names them, so a client reads the same detail.
            extra = {"size": int(declared), "limit": self.max_bytes}
            await self.refuse(request, self._detail(f"{declared} bytes"), extra)(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    # Raised inside the endpoint's body read: the problem handlers answer it.
                    raise HTTPException(413, self._detail(f"over {self.max_bytes} bytes"))
            return message

        await self.app(scope, counted, send)


class JsonValueLimit:
    """ASGI middleware for an app that parses its own bodies (the MCP SDK's): a body of more than
    limits.BODY_JSON_VALUES JSON values gets a 413 `request_too_large` problem before the app sees it.
    It reads the whole body (put it behind BodyLimit, and behind the key check: an anonymous
    caller's body is never read) and hands the app the same bytes."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        try:
            while True:
                message = await receive()
                if message["type"] != "http.request":  # the client went away: nothing to serve
                    return
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    break
        except HTTPException as e:  # BodyLimit's count of a body sent without Content-Length
            await problem_response(Request(scope), e.status_code, "request_too_large", e.detail)(
                scope, receive, send
            )
            return
        body = b"".join(chunks)
        if limits.json_values_over(body, limits.BODY_JSON_VALUES):
            extra = {"limit": limits.BODY_JSON_VALUES}
            response = problem_response(Request(scope), 413, "request_too_large", TOO_MANY_VALUES, extra)
            await response(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
