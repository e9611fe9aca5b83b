"""Errors as pages: a typed error answers with its category's status from the one error table
(mnemo_sea.system.outcomes, as REST and MCP map it) and says what was wrong; a missing or
refused credential answers with the login form. A record of another tenant is NotFound, which
reads exactly like one that never existed."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from mnemo_sea.archive import Principal
from mnemo_sea.console.pages import render
from mnemo_sea.console.viewer import LoginNeeded
from mnemo_sea.errors import MnemoError
from mnemo_sea.system.outcomes import outcome_of

log = logging.getLogger("mnemo_sea.console")


# The codes of the answers the framework gives without a typed error, as REST names them.
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}


def _principal(request: Request) -> Principal | None:
    """Who is looking, when the credential was checked before the error (for the page's banner)."""
    found = getattr(request.state, "principal", None)
    return found if isinstance(found, Principal) else None


def install(app: FastAPI) -> None:
    @app.exception_handler(LoginNeeded)
    async def login_needed(request: Request, exc: LoginNeeded) -> Response:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return render(request, "login.html", None, 401, reason=exc.reason, next=target)

    @app.exception_handler(MnemoError)
    async def typed_error(request: Request, exc: MnemoError) -> Response:
        status = outcome_of(exc).http_status
        if status >= 500:
            log.error("console: %s: %s", exc.code, exc)
        return render(
            request, "error.html", _principal(request), status, code=exc.code, detail=str(exc), status=status
        )

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'][1:]) or 'request'}: {e['msg']}" for e in exc.errors()
        )
        return render(
            request, "error.html", _principal(request), 422, code="invalid_input", detail=problems, status=422
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return render(
            request,
            "error.html",
            _principal(request),
            exc.status_code,
            code=_HTTP_CODES.get(exc.status_code, "http_error"),
            detail=str(exc.detail),
            status=exc.status_code,
        )
