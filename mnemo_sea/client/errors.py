"""Answers as errors: a problem+json answer becomes the typed error the server raised.

The class comes from the one error table (mnemo_sea.system.outcomes.error_class: the class of
the problem's `code` among the layers' error modules, or the most general class of the status's
category for an answer without a class of its own, such as REST's `invalid_request`), and the
error is rebuilt from the problem's `detail` (its message) and extra members (its detail:
`targets` of a rejected batch, `problems` of a refused task state, ...), so `except NotFound`
and `err.targets` work as they do in process. The request id is attached as `request_id`.

A server that cannot be reached is `ApiUnreachable`, a `StoreUnavailable`: the store this
client talks to is the API.
"""

from __future__ import annotations

from typing import Any

# Imported for their classes: error_class finds a code's class among the loaded error modules.
import mnemo_sea.archive.errors
import mnemo_sea.context.errors
import mnemo_sea.retrieval.errors
import mnemo_sea.system.errors  # noqa: F401
from mnemo_sea.archive import StoreUnavailable
from mnemo_sea.client.wire import Reply, Request
from mnemo_sea.system.outcomes import error_class, rebuild

# The members every problem has (RFC 9457 and the API's own); the others are the error's detail.
_PROBLEM_MEMBERS = frozenset({"type", "title", "status", "detail", "code", "request_id"})


class ApiUnreachable(StoreUnavailable):
    """The REST API did not answer: no connection, a timeout, or a connection lost before the
    answer, after the client's retries. Unlike the archive's own StoreUnavailable, a write may
    have reached the server (`sent`): a write sent under `idempotency_key` is safe to send
    again with that key (the server answers it once), and the client did so while it retried."""

    code = "api_unreachable"

    def __init__(
        self, url: str, reason: str, *, sent: bool, request_id: str, idempotency_key: str | None = None
    ) -> None:
        again = (
            f"; send it again with idempotency_key={idempotency_key!r} to learn whether it was written"
            if sent and idempotency_key is not None
            else ""
        )
        super().__init__(
            f"the mnemo-sea API at {url} did not answer: {reason}{again}",
            url=url,
            reason=reason,
            sent=sent,
            request_id=request_id,
            idempotency_key=idempotency_key,
        )
        self.request_id = request_id


def error_of(reply: Reply, request: Request) -> BaseException:
    """The typed error an error answer stands for, with the request id attached."""
    body: dict[str, Any] = reply.body if isinstance(reply.body, dict) else {}
    code = reply.problem_code
    if code is None:
        # Not a problem of this API (a proxy's page, say): the status's category decides.
        code = f"http_{reply.status}"
        message = f"HTTP {reply.status} from the API: {reply.text.strip()[:200] or 'no body'}"
    else:
        message = str(body.get("detail") or body.get("title") or code)
    cls = error_class(code, reply.status)
    exc = rebuild(cls, message, {k: v for k, v in body.items() if k not in _PROBLEM_MEMBERS})
    if getattr(exc, "code", None) != code:
        # An answer without a class of its own keeps its code (e.g. invalid_request).
        vars(exc)["code"] = code
    request_id = body.get("request_id") or reply.request_id or request.request_id
    vars(exc)["request_id"] = request_id
    return exc


def unreachable(url: str, request: Request, error: Exception, *, sent: bool) -> ApiUnreachable:
    reason = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return ApiUnreachable(
        url, reason, sent=sent, request_id=request.request_id, idempotency_key=request.idempotency_key
    )


__all__ = ["ApiUnreachable", "error_of", "unreachable"]
