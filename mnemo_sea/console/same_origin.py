"""The console's forms answer only pages of the console itself.

The credential cookie is SameSite=Strict, which keeps other *sites* from sending it; but a page
on another port of 127.0.0.1, or on a sibling subdomain, is the same site, so its form posts would
carry the cookie. A browser says where a request comes from: `Sec-Fetch-Site` (every current
browser) and `Origin` on a POST. A POST that a browser marks as from elsewhere is refused with
the 403 page before the form is read; a client that sends neither header (a script with a key)
is no browser page and goes on.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from mnemo_sea.console.pages import render

_OWN = frozenset({"same-origin", "none"})  # `none`: typed or bookmarked by the person


def _elsewhere(headers: Headers) -> str | None:
    """Why the request comes from another page's origin, or None."""
    fetched_from = headers.get("sec-fetch-site")
    if fetched_from is not None and fetched_from not in _OWN:
        return f"a form posted from a {fetched_from} page"
    origin = headers.get("origin")
    if origin is not None and origin != "null":
        parts = urlsplit(origin)
        if parts.netloc != headers.get("host", ""):
            return f"a form posted from {origin}"
    return None


class SameOriginForms:
    """ASGI middleware: a POST from another origin gets the 403 page, unread."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            why = _elsewhere(Headers(scope=scope))
            if why is not None:
                page = render(
                    Request(scope, receive),
                    "error.html",
                    None,
                    403,
                    code="cross_origin",
                    detail=f"{why}: the console's forms answer only its own pages",
                    status=403,
                )
                await page(scope, receive, send)
                return
        await self.app(scope, receive, send)
