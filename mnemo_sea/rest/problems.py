"""The one place where errors become HTTP answers: RFC 9457 problem+json with honest codes.

The status of every typed error is its category's in the one error table,
mnemo_sea.system.outcomes.ANSWERS (whose statuses were this module's; a rejected batch lists
each target's status, and a tenant over its share of the service, rest/admission.py, is its
busy category). Both 503 and 429 carry Retry-After: 429 the seconds the refusal names
(`retry_after`), 503 one.

A deletion receipt or audit anchor that does not check out (ReceiptInvalid; `check` says which
check failed: signature, key, or an audit event the chain no longer holds) is 422: the request
is well-formed, but the document the client sent is not proof this server can accept. It is
not 409, since no change of the resource's state by the client would make it acceptable, nor
500: the server answered correctly, and a rewound chain it reveals is reported by audit verify.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException

from mnemo_sea.errors import MnemoError
from mnemo_sea.system.outcomes import outcome_of

PROBLEM_JSON = "application/problem+json"
TYPE_BASE = "https://mnemo-sea.dev/problems/"
log = logging.getLogger("mnemo_sea.rest")


class Problem(BaseModel):
    """An error answer. `code` is stable for programs; extra members carry structured detail
    (e.g. `targets` of a rejected archive batch, `problems` of an invalid ingest batch)."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str
    code: str
    request_id: str | None = None


class ApiProblem(Exception):
    """An HTTP-level problem raised by the REST layer itself (body too large, bad header, ...)."""

    def __init__(self, status: int, code: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.extra = extra


_TITLES = {
    401: "Unauthenticated",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Content too large",
    422: "Invalid request",
    429: "Too many requests",
    500: "Internal error",
    503: "Service unavailable",
}


def status_of(exc: MnemoError) -> int:
    """The HTTP status of a typed error: its category's in the one error table."""
    return outcome_of(exc).http_status


def problem_response(
    request: Request, status: int, code: str, detail: str, extra: dict[str, Any] | None = None
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": TYPE_BASE + code,
        "title": _TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        "code": code,
        "request_id": getattr(request.state, "request_id", None),
    }
    for key, value in (extra or {}).items():
        body.setdefault(key, value)
    headers: dict[str, str] = {}
    if body["request_id"] is not None:
        # Set here too: a 500 is answered outside the middleware that sets it on the rest.
        headers["X-Request-ID"] = body["request_id"]
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="mnemo-sea"'
    if status == 503:
        headers["Retry-After"] = "1"
    if status == 429:
        headers["Retry-After"] = str(body.get("retry_after", 1))
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def domain_problem(request: Request, exc: Exception) -> JSONResponse:
    """The problem+json answer to a typed error (also used by the MCP transport's key check)."""
    assert isinstance(exc, MnemoError)
    status = status_of(exc)
    if status >= 500:
        log.warning("store problem", extra={"code": exc.code, "error": str(exc)})
    extra = {k: v for k, v in exc.to_dict().items() if k not in ("code", "message")}
    return problem_response(request, status, exc.code, exc.message, extra)


def _api_problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiProblem)
    return problem_response(request, exc.status, exc.code, exc.detail, exc.extra)


_OVER_CAP = frozenset({"string_too_long", "too_long", "bytes_too_long", "json_too_large", "json_too_deep"})


def _validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = []
    for err in exc.errors():
        error: dict[str, Any] = {
            "loc": [str(part) for part in err.get("loc", ())],
            "msg": str(err.get("msg", "")),
            "type": err.get("type"),
        }
        # A field over its size cap (archive/rules/limits.py) says the cap, as InvalidInput's `limit`.
        context = err.get("ctx") or {}
        limit = context.get("max_length", context.get("limit"))
        if isinstance(limit, int) and err.get("type") in _OVER_CAP:
            error["limit"] = limit
        errors.append(error)
    shown = "; ".join(f"{'.'.join(e['loc'])}: {e['msg']}" for e in errors[:5])
    return problem_response(request, 422, "invalid_request", shown or "invalid request", {"errors": errors})


def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400:
        # FastAPI's answer to a body it cannot decode (not UTF-8, say); a JSON syntax error is
        # already a 422, and an undecodable body is the same mistake, so it gets the same answer.
        error = {"loc": ["body"], "msg": str(exc.detail), "type": "body_unreadable"}
        return problem_response(
            request, 422, "invalid_request", f"body: {exc.detail} (send UTF-8 JSON)", {"errors": [error]}
        )
    code = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}.get(
        exc.status_code, "http_error"
    )
    return problem_response(request, exc.status_code, code, str(exc.detail))


def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # Starlette runs a sync handler in a worker thread, where sys.exc_info() is empty, so the
    # exception is passed explicitly: the log must carry the traceback the answer withholds.
    log.error("unexpected error", exc_info=exc, extra={"error_type": type(exc).__name__})
    return problem_response(request, 500, "internal_error", "unexpected server error; see the logs")


def install(app: FastAPI) -> None:
    app.add_exception_handler(MnemoError, domain_problem)
    app.add_exception_handler(ApiProblem, _api_problem)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the problems an endpoint can answer (every endpoint: 401, 422, 503)."""
    wanted = sorted({401, 422, 503, *statuses})
    return {s: {"model": Problem, "description": _TITLES.get(s, "Error")} for s in wanted}
