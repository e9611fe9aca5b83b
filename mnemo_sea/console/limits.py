"""The console's cap on a request body: its forms send a key or a deletion receipt, nothing
larger, so a body above MAX_BODY_BYTES is refused with a page before it is read or parsed (a
declared length up front, a chunked body as it is counted). `mnemo-sea ui` has no REST app in
front of it, whose own limit (MNEMO_MAX_REQUEST_BYTES) would otherwise be the only one.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mnemo_sea.console.pages import render

# A receipt lists every id and hash a deletion removed: a person's data can run to thousands.
MAX_BODY_BYTES = 8 * 1024 * 1024


def _detail(size: str) -> str:
    return f"the request ({size}) is over the console's limit of {MAX_BODY_BYTES} bytes"


class BodyCap:
    """ASGI middleware: request bodies above MAX_BODY_BYTES get the 413 error page."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            page = render(
                Request(scope, receive),
                "error.html",
                None,
                413,
                code="request_too_large",
                detail=_detail(f"{declared} bytes"),
                status=413,
            )
            await page(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > MAX_BODY_BYTES:
                    # Raised inside the page's read of its form: the error pages answer it.
                    raise HTTPException(413, _detail(f"over {MAX_BODY_BYTES} bytes"))
            return message

        await self.app(scope, counted, send)
