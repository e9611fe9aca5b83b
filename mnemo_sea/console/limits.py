"""The console's cap on a request body: its forms send a key or a deletion receipt, nothing
larger, so a body above MAX_BODY_BYTES is refused with a page before it is read or parsed (a
declared length up front, a chunked body as it is counted: REST's BodyLimit, answering with the
error page). `mnemo-sea ui` has no REST app in front of it, whose own limit
(MNEMO_MAX_REQUEST_BYTES) would otherwise be the only one.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from mnemo_sea.console.pages import render

# A receipt lists every id and hash a deletion removed: a person's data can run to thousands.
MAX_BODY_BYTES = 8 * 1024 * 1024


def too_large_page(request: Request, detail: str, extra: dict[str, Any]) -> Response:
    """The 413 page of a body declared over the cap (rest/limits.BodyLimit's `refuse`)."""
    return render(request, "error.html", None, 413, code="request_too_large", detail=detail, status=413)
