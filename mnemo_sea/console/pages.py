"""Rendering a page: the packaged templates, what every page shows (who is looking, where the
console is mounted), and the window of a long list a page shows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, Response
from fastapi.templating import Jinja2Templates

from mnemo_sea.archive import Principal, Role
from mnemo_sea.console.links import ref_path

TEMPLATES = Jinja2Templates(directory=Path(__file__).parent / "templates")
# Items on a page of a long list: a session may hold tens of thousands of results.
PAGE_SIZE = 50


def _when(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2, default=str)


TEMPLATES.env.filters["when"] = _when
TEMPLATES.env.filters["pretty_json"] = _json
# Ids go into paths and queries percent-encoded: evidence ids may hold `/`, `#`, `?` and spaces.
TEMPLATES.env.filters["q"] = lambda value: quote(str(value), safe="")
# Where a source ref leads (a page under the console's root), or None: console/links.py.
TEMPLATES.env.filters["ref_path"] = ref_path
# The role the audit and deletion pages need: the menu offers them to admins only (another's
# visit is refused, and the archive audits every refused access).
TEMPLATES.env.globals["ADMIN"] = Role.ADMIN


def base_of(request: Request) -> str:
    """Where the console is mounted (`/ui`): every link a page writes starts there."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def render(
    request: Request, template: str, principal: Principal | None, status_code: int = 200, **context: Any
) -> HTMLResponse:
    return TEMPLATES.TemplateResponse(
        request,
        template,
        {"base": base_of(request), "viewer": principal, **context},
        status_code=status_code,
        headers=_HEADERS,
    )


# No page is cached by the browser or a proxy (each shows one tenant's records), none may be
# framed by another site, and scripts and styles come only from the console itself.
_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
    "script-src 'self'; frame-ancestors 'none'; form-action 'self'",
}


def security_headers() -> dict[str, str]:
    return dict(_HEADERS)


@dataclass(frozen=True)
class Window:
    """One page of a long list: `items` from `offset`, and whether more follow."""

    offset: int
    limit: int
    more: bool
    param: str = "offset"  # the query parameter that names the offset (a page may page two lists)

    @classmethod
    def of(
        cls, found: list[Any], offset: int, limit: int = PAGE_SIZE, *, param: str = "offset"
    ) -> tuple[list[Any], Window]:
        """The page of `found`, read as `limit + 1` items from `offset` (the extra one says
        whether a next page exists)."""
        return found[:limit], cls(offset, limit, len(found) > limit, param)

    def link(self, path: str, offset: int, **query: Any) -> str:
        params = {k: v for k, v in query.items() if v not in (None, "")}
        params[self.param] = offset
        return f"{path}?{urlencode(params)}"

    def previous(self) -> int | None:
        return max(self.offset - self.limit, 0) if self.offset > 0 else None

    def next(self) -> int | None:
        return self.offset + self.limit if self.more else None


def as_text(content: bytes | None) -> str | None:
    """An original as text when it is UTF-8 (shown escaped, exactly); None when it is not, and
    the page offers it as a download."""
    try:
        return (content or b"").decode("utf-8")
    except UnicodeDecodeError:
        return None


def download(content: bytes | None, name: str, media_type: str, sha256: str) -> Response:
    """An original byte for byte as an attachment (`name` gets .txt for text, .bin otherwise).
    Never rendered by the browser: a tool's output or a document may be HTML or a script."""
    suffix = ".txt" if media_type.startswith("text/") else ".bin"
    headers = {
        **security_headers(),
        "Content-Disposition": f'attachment; filename="{name}{suffix}"',
        "X-Content-SHA256": sha256,
    }
    return Response(content or b"", media_type="application/octet-stream", headers=headers)
